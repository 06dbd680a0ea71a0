#!/usr/bin/env python3
"""Drives an installed Reverie as a new user would, inside the clean root
that scripts/package-check prepares: the window opens on the first-run
screen, fetches the default model with its progress bar and chats; then the
terminal chat answers on the same data folder. Prints one JSON object and
saves screenshots under --out. Standard library only: it runs on a fresh
Debian with the package, Xvfb and WebKitWebDriver installed.
"""
import argparse
import base64
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error

from webdriver import ELEMENT, http


def fail(msg):
    print(f"package check: {msg}", file=sys.stderr)
    sys.exit(1)


class Window:
    def __init__(self, base, session):
        self.s = f"{base}/session/{session}"

    def all(self, css):
        v = http("POST", f"{self.s}/elements", {"using": "css selector", "value": css})
        return [e[ELEMENT] for e in v]

    def wait(self, what, seconds, ok):
        end = time.time() + seconds
        while True:
            got = ok()
            if got:
                return got
            if time.time() > end:
                self.shot("timeout")
                fail(f"timed out after {seconds} s waiting for {what}")
            time.sleep(0.5)

    def one(self, css, seconds=60):
        return self.wait(css, seconds, lambda: (self.all(css) or [None])[0])

    def text(self, el):
        return http("GET", f"{self.s}/element/{el}/text") or ""

    def attr(self, el, name):
        return http("GET", f"{self.s}/element/{el}/attribute/{name}")

    def click(self, el):
        http("POST", f"{self.s}/element/{el}/click", {})

    def type(self, el, text):
        http("POST", f"{self.s}/element/{el}/value", {"text": text})

    def shot(self, name):
        png = http("GET", f"{self.s}/screenshot")
        if png and ARGS:
            with open(os.path.join(ARGS.out, f"{name}.png"), "wb") as f:
                f.write(base64.b64decode(png))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_from_menu(env, seconds=15):
    """Runs the desktop entry's Exec line and sees the app stay up with its
    window's process for `seconds`; returns how long it was watched."""
    with open("/usr/share/applications/Reverie.desktop") as f:
        entry = dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)
    argv = [a for a in entry["Exec"].split() if not a.startswith("%")]
    app = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(seconds)
    if app.poll() is not None:
        fail(f"the menu entry's `{entry['Exec']}` exited with {app.returncode}: {app.stderr.read().decode()[-2000:]}")
    app.terminate()
    app.wait(30)
    return seconds


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--fetch-timeout", type=int, default=1800)
    ARGS = p.parse_args()
    os.makedirs(ARGS.out, exist_ok=True)
    report = {}

    display = ":77"
    xvfb = subprocess.Popen(["Xvfb", display, "-screen", "0", "1280x800x24", "-nolisten", "tcp"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1)
    port = free_port()
    env = dict(os.environ, DISPLAY=display, TAURI_WEBVIEW_AUTOMATION="true",
               WEBKIT_DISABLE_COMPOSITING_MODE="1", LIBGL_ALWAYS_SOFTWARE="1")
    log = open(os.path.join(ARGS.out, "webdriver.log"), "w")
    wd = subprocess.Popen(["WebKitWebDriver", f"--port={port}"], env=env, stdout=log, stderr=log)
    base = f"http://127.0.0.1:{port}"
    try:
        end = time.time() + 30
        while True:
            try:
                http("GET", f"{base}/status", timeout=2)
                break
            except (urllib.error.URLError, ConnectionError):
                if time.time() > end:
                    fail("WebKitWebDriver did not start")
                time.sleep(0.3)
        caps = {"capabilities": {"alwaysMatch": {"webkitgtk:browserOptions": {
            "binary": "/usr/bin/reverie-desktop", "args": ["--threads", "2"]}}}}
        session = http("POST", f"{base}/session", caps, timeout=180)["sessionId"]
        w = Window(base, session)

        # A fresh data folder: the first-run screen.
        title = w.text(w.one(".first-run h1"))
        report["first_run_title"] = title
        w.shot("1-first-run")
        w.click(w.one(".first-run .card button"))
        started = time.time()
        bar = w.one("[data-testid=fetch-progress]", 60)
        seen = set()

        def ready():
            for el in w.all("[data-testid=fetch-progress]"):
                try:
                    seen.add(round(float(w.attr(el, "value") or 0), 2))
                except (TypeError, ValueError):
                    pass
            problem = w.all(".first-run .error")
            if problem:
                fail(f"the fetch failed: {w.text(problem[0])}")
            return w.all(".empty-chat button")

        w.shot("2-fetching")
        start = w.wait("the default model", ARGS.fetch_timeout, ready)[0]
        report["fetch_s"] = round(time.time() - started, 1)
        report["progress_values_seen"] = sorted(seen)
        del bar

        # Chat in the window on the fetched model.
        w.click(start)
        box = w.one("textarea[aria-label=Message]")
        w.type(box, "Say hello in five words.\ue007")
        sent = time.time()

        def replied():
            done = w.all("[data-testid=assistant-message]")
            busy = w.all(".cursor") or any(w.text(b) == "Stop" for b in w.all(".composer button"))
            return done if done and not busy else None

        reply = w.wait("the window's reply", 600, replied)
        report["window_reply"] = w.text(reply[-1])[:200]
        report["window_reply_s"] = round(time.time() - sent, 1)
        w.shot("3-chat")
        http("DELETE", w.s)

        # As the application menu starts it: the desktop entry's Exec line.
        report["menu_entry_runs_s"] = launch_from_menu(env)
    finally:
        wd.terminate()
        xvfb.terminate()

    # The terminal chat on the same data folder and the fetched model.
    out = subprocess.run(["reverie", "chat", "--prompt", "What is 2 + 3?", "--json", "--threads", "2"],
                         capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        fail(f"reverie chat failed ({out.returncode}): {out.stderr[-2000:]}")
    report["cli_reply"] = json.loads(out.stdout).get("reply", "")[:200]
    print(json.dumps(report, ensure_ascii=False))


ARGS = None
if __name__ == "__main__":
    main()
