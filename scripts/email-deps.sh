# Sourced by scripts/test.sh: what tests/email.rs needs — a real SMTP server (PyPI aiosmtpd) and
# headless Chromium driven by Playwright (Debian's chromium; Playwright's own browser download is
# never used) — pinned, installed once into ~/.cache/countersign/email.
# Exports COUNTERSIGN_EMAIL_PYTHON (a Python with both) and CHROMIUM.
email_dir=${COUNTERSIGN_EMAIL_DIR:-$HOME/.cache/countersign/email}
email_pins="aiosmtpd==1.4.6 playwright==1.55.0"
if [ "$(cat "$email_dir/pins" 2>/dev/null)" != "$email_pins" ] || [ ! -x "$email_dir/venv/bin/python" ]; then
  echo "installing $email_pins into $email_dir/venv"
  rm -rf "$email_dir/venv" && mkdir -p "$email_dir" && python3 -m venv "$email_dir/venv"
  # shellcheck disable=SC2086
  "$email_dir/venv/bin/pip" install -q $email_pins && echo "$email_pins" > "$email_dir/pins"
fi
if ! command -v chromium >/dev/null 2>&1; then
  email_sudo=""; [ "$(id -u)" = 0 ] || email_sudo="sudo"
  $email_sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $email_sudo apt-get install -y -qq chromium >/dev/null
fi
CHROMIUM=$(command -v chromium)
export COUNTERSIGN_EMAIL_PYTHON="$email_dir/venv/bin/python" CHROMIUM
