#!/usr/bin/env python3
"""The bench page in a real browser: headless Chromium (Debian's chromium + chromium-driver) driven by Selenium.

Runs the bridge itself (so it can restart it), reads through `plings-bridge scan`, and checks what a packer sees:
  - a scan shows within 1 s of its commit (the `scan` command returning);
  - an unrecognized read is marked as such, with its reason;
  - a hostile barcode shows as its text and runs nothing (no script, no image element, no alert);
  - after the bridge restarts (with scans spooled while it was down) the page recovers by itself: every scan in
    the spool is on the page once.
Prints one JSON report line; exits 0 when every check held. Keeps a screenshot at --screenshot.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

report = {"checks": {}}


def check(name, held, detail=None):
    report["checks"][name] = {"ok": bool(held), **({"detail": detail} if detail is not None else {})}


def start_bridge(args):
    bridge = subprocess.Popen([args.bridge, "run", "--config", args.config, "--spool", args.spool],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(args.url + "healthz", timeout=1) as answer:
                if answer.status == 200:
                    return bridge
        except urllib.error.HTTPError as refused:
            if refused.code == 401:  # with a token: it answers, and asks for the token
                return bridge
            time.sleep(0.05)
        except OSError:
            time.sleep(0.05)
    raise SystemExit("the bridge did not answer /healthz")


def scan(args, text):
    """One read through the CLI; returns its scan id and when the command returned (committed)."""
    out = subprocess.run([args.bridge, "scan", text, "--device", "bench-1", "--config", args.config,
                          "--spool", args.spool], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["id"], time.monotonic()


def wait_for(driver, predicate, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate(driver)
        if value:
            return value
        time.sleep(0.01)
    return None


def row(driver, scan_id):
    found = driver.find_elements(By.CSS_SELECTOR, f'.scan[data-id="{scan_id}"]')
    return found[0] if found else None


def main():
    parser = argparse.ArgumentParser()
    for name in ("--bridge", "--config", "--spool", "--url", "--screenshot"):
        parser.add_argument(name, required=True)
    # An instrumented build (ThreadSanitizer) runs several times slower: the test scales the promise.
    parser.add_argument("--latency-limit", type=float, default=1.0)
    args = parser.parse_args()

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1000,900",
                 "--disable-dev-shm-usage", f"--user-data-dir={tempfile.mkdtemp(prefix='chromium-')}"):
        options.add_argument(flag)
    bridge = start_bridge(args)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    try:
        driver.get(args.url)
        live = wait_for(driver, lambda d: "up" in d.find_element(By.ID, "link").get_attribute("class"), 10)
        check("page connects to /events", live)
        # No sink is configured: the DELIVERY panel says the spool is the destination (issue 56), not "waiting".
        check("the delivery panel says reads are kept, none waiting",
              wait_for(driver, lambda d: "reads are kept in the spool" in d.find_element(By.ID, "sinks").text, 10))

        scan_id, committed = scan(args, "https://s.plings.io/?t=q&i=BenchPage1&p=4.2.3.3.6")
        shown = wait_for(driver, lambda d: row(d, scan_id), 5)
        latency = time.monotonic() - committed
        report["commitToPageSeconds"] = round(latency, 3)
        check("a scan shows within 1 s of its commit", shown is not None and latency <= args.latency_limit, latency)
        check("a recognized scan shows its identifier",
              shown is not None and shown.find_element(By.CLASS_NAME, "what").text == "BenchPage1")

        odd_id, _ = scan(args, "hello world")
        odd = wait_for(driver, lambda d: row(d, odd_id), 5)
        check("an unrecognized read is marked", odd is not None and "unrecognized" in odd.get_attribute("class")
              and "not a Plings code" in odd.find_element(By.CLASS_NAME, "detail").text)

        hostile = '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>"\'&amp;'
        hostile_id, _ = scan(args, hostile)
        bad = wait_for(driver, lambda d: row(d, hostile_id), 5)
        text = bad.find_element(By.CLASS_NAME, "what").get_attribute("textContent") if bad else None
        check("a hostile barcode shows as its text", text == hostile, text)
        check("a hostile barcode adds no element", len(driver.find_elements(By.CSS_SELECTOR, ".scan img, .scan script")) == 0)
        check("a hostile barcode runs nothing", driver.execute_script("return window.pwned === undefined"))
        try:
            driver.switch_to.alert
            check("no alert", False)
        except NoAlertPresentException:
            check("no alert", True)

        # A restart with scans spooled while the service was down: the page recovers by itself.
        bridge.terminate()
        bridge.wait(10)
        check("the page notices the bridge is gone",
              wait_for(driver, lambda d: "down" in d.find_element(By.ID, "link").get_attribute("class"), 10))
        for n in (1, 2):
            scan(args, f"https://s.plings.io/?t=q&i=WhyDown{n}&p=1.2")
        bridge = start_bridge(args)
        after_id, _ = scan(args, "https://s.plings.io/?t=q&i=AfterRestart&p=1.2")
        exported = subprocess.run([args.bridge, "spool", "export", "--config", args.config, "--spool", args.spool],
                                  capture_output=True, text=True, check=True).stdout.splitlines()
        expected = [json.loads(line)["id"] for line in exported]
        def all_shown(d):
            ids = [e.get_attribute("data-id") for e in d.find_elements(By.CSS_SELECTOR, ".scan")]
            return ids if sorted(ids) == sorted(expected) else None
        ids = wait_for(driver, all_shown, 15)
        on_page = [e.get_attribute("data-id") for e in driver.find_elements(By.CSS_SELECTOR, ".scan")]
        check("after a restart every scan is on the page once", ids is not None and len(set(on_page)) == len(on_page),
              {"expected": len(expected), "shown": len(on_page)})
        check("the newest scan is first", on_page and on_page[0] == after_id)

        # Issue 60: with a token, a sign-in starts a session that lives in the service's memory, so a restart ends
        # it: the open page shows the sign-in form again by itself (not "reconnecting" for ever), and signing in
        # brings back every scan.
        token = "bench-page-token-4Bx9"
        token_file = os.path.join(os.path.dirname(os.path.abspath(args.spool)), "http-token")
        with open(token_file, "w", encoding="utf-8") as f:
            f.write(token + "\n")
        os.chmod(token_file, 0o600)
        with open(args.config, encoding="utf-8") as f:
            config = json.load(f)
        config.setdefault("http", {})["tokenFile"] = token_file
        with open(args.config, "w", encoding="utf-8") as f:
            json.dump(config, f)
        bridge.terminate()
        bridge.wait(10)
        bridge = start_bridge(args)

        def sign_in(d):
            fields = d.find_elements(By.NAME, "token")
            if not fields:
                return None
            fields[0].send_keys(token)
            fields[0].submit()
            return True

        driver.get(args.url)
        check("with a token the page asks for it", wait_for(driver, sign_in, 10))
        check("signed in, the page is live",
              wait_for(driver, lambda d: "up" in d.find_element(By.ID, "link").get_attribute("class"), 10))
        bridge.terminate()
        bridge.wait(10)
        bridge = start_bridge(args)
        asked = wait_for(driver, lambda d: d.find_elements(By.NAME, "token") or None, 15)
        check("after a restart ended its session the page asks for the token again by itself", asked is not None)
        if asked:
            sign_in(driver)
        check("signed in again, every scan is on the page", wait_for(driver, all_shown, 15) is not None)
        driver.save_screenshot(args.screenshot)
        check("screenshot kept", os.path.getsize(args.screenshot) > 0)
    finally:
        driver.quit()
        bridge.terminate()
        bridge.wait(10)
    report["ok"] = all(c["ok"] for c in report["checks"].values())
    print(json.dumps(report))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
