"""Open a mailed confirmation link in headless Chromium (Playwright, pinned in
scripts/email-deps.sh), as a person would, and press Approve or Deny (with a reason).

    python confirm.py URL approve|deny|look [REASON]

Prints one JSON object: the page's status and text as opened, then the decision's status and
the text of the page it answered with, and anything the browser logged (a CSP violation would
show there).
"""
import json
import os
import sys

from playwright.sync_api import sync_playwright

ARGS = [
    "--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
]


def main():
    url, decision = sys.argv[1], sys.argv[2]
    reason = sys.argv[3] if len(sys.argv) > 3 else ""
    out = {"console": []}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=os.environ["CHROMIUM"], args=ARGS, headless=True)
        page = browser.new_page()
        page.on("console", lambda m: out["console"].append(f"{m.type}: {m.text}"))
        shown = page.goto(url)
        out["shown_status"] = shown.status
        out["shown"] = page.inner_text("body")
        if decision in ("approve", "deny"):
            if decision == "deny":
                page.fill("#reason", reason)
            with page.expect_response(lambda r: r.request.method == "POST") as answer:
                page.click(f"button[value={decision}]")
            page.wait_for_load_state()
            out["status"] = answer.value.status
            out["result"] = page.inner_text("body")
        browser.close()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
