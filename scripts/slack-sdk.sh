# Sourced before tests/slack.rs: Slack's own Python SDK, pinned, installed once into
# ~/.cache/countersign/slack from PyPI. Its Block Kit models parse every message countersign
# sends to the Web API stand-in (tests/slack/web_api.py), and its request signing signs the
# tests' interactions. Exports COUNTERSIGN_SLACK_PYTHON (a Python with slack_sdk).
slack_dir=${COUNTERSIGN_SLACK_DIR:-$HOME/.cache/countersign/slack}
slack_sdk_pin="slack_sdk==3.47.0"
if [ "$(cat "$slack_dir/pins" 2>/dev/null)" != "$slack_sdk_pin" ] || [ ! -x "$slack_dir/bin/python" ]; then
  echo "installing $slack_sdk_pin into $slack_dir"
  rm -rf "$slack_dir" && python3 -m venv "$slack_dir"
  "$slack_dir/bin/pip" install -q "$slack_sdk_pin" && echo "$slack_sdk_pin" > "$slack_dir/pins"
fi
export COUNTERSIGN_SLACK_PYTHON="$slack_dir/bin/python"
