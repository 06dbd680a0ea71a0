#!/usr/bin/env python3
"""Takes the README's pictures of the real window on a real model: starts
reverie-desktop under Xvfb through WebKitWebDriver, chats, runs a night,
and photographs the chat, the Sleep view and the reviewer.

    scripts/screenshot-window.py --app target/release/reverie-desktop \
        --model ~/.local/share/reverie/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf \
        --out docs/screenshots

It works on a fresh data folder (a temporary one unless --home is given),
so your own chats are not shown. Needs Xvfb, WebKitWebDriver and Pillow.
"""
import argparse
import json
import os
import socket
import subprocess
import tempfile
import time
import urllib.error

from PIL import ImageGrab
from webdriver import ELEMENT, http


class Window:
    def __init__(self, base, session, display):
        self.s = f"{base}/session/{session}"
        self.display = display

    def all(self, css):
        v = http("POST", f"{self.s}/elements", {"using": "css selector", "value": css})
        return [e[ELEMENT] for e in v]

    def wait(self, what, seconds, ok):
        end = time.time() + seconds
        while not ok():
            if time.time() > end:
                raise SystemExit(f"timed out waiting for {what}")
            time.sleep(0.5)

    def one(self, css, seconds=30):
        found = []
        self.wait(css, seconds, lambda: found.extend(self.all(css)) or bool(found))
        return found[0]

    def text(self, el):
        return http("GET", f"{self.s}/element/{el}/text") or ""

    def click(self, css):
        http("POST", f"{self.s}/element/{self.one(css)}/click", {})

    def click_text(self, css, label):
        for el in self.all(css):
            if self.text(el).strip() == label:
                http("POST", f"{self.s}/element/{el}/click", {})
                return
        raise SystemExit(f"no {css} reading {label!r}")

    def type(self, css, text):
        http("POST", f"{self.s}/element/{self.one(css)}/value", {"text": text})

    def busy(self):
        return bool(self.all(".cursor")) or any(self.text(b) == "Stop" for b in self.all(".composer button"))

    def idle(self):
        # Twice, two seconds apart: a turn pauses between a tool call and the
        # next reply.
        if self.busy():
            return False
        time.sleep(2)
        return not self.busy()

    def shot(self, path):
        # From the X server: WebKitWebDriver's own screenshot sometimes
        # never returns once a page has been redrawn many times.
        time.sleep(1)
        ImageGrab.grab(xdisplay=self.display).save(path)
        print("wrote", path)

    def close(self):
        http("DELETE", self.s)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--app", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", default="docs/screenshots")
    ap.add_argument("--home")
    ap.add_argument("--no-tools", action="store_true",
                    help="chat without tools: short days, so the night takes minutes on a CPU")
    a = ap.parse_args()
    home = a.home or tempfile.mkdtemp(prefix="reverie-shots-")
    os.makedirs(a.out, exist_ok=True)
    if a.no_tools:
        os.makedirs(home, exist_ok=True)
        with open(os.path.join(home, "settings.json"), "w") as f:
            json.dump({"tools": False}, f)
    display = ":77"
    # The window's own size, so a grab of the screen is a grab of the window.
    xvfb = subprocess.Popen(["Xvfb", display, "-screen", "0", "1200x800x24", "-nolisten", "tcp"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, DISPLAY=display, TAURI_WEBVIEW_AUTOMATION="true", WEBKIT_DISABLE_COMPOSITING_MODE="1")
    log = open(os.path.join(home, "window.log"), "w") if a.home else subprocess.DEVNULL
    driver = subprocess.Popen(["WebKitWebDriver", f"--port={port}"], env=env,
                              stdout=log, stderr=log)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                http("GET", f"{base}/status", timeout=2)
                break
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.2)
        caps = {"capabilities": {"alwaysMatch": {"webkitgtk:browserOptions": {
            "binary": os.path.abspath(a.app), "args": ["--home", home, "--model", os.path.abspath(a.model)]}}}}
        w = Window(base, http("POST", f"{base}/session", caps)["sessionId"], display)
        w.click(".empty-chat button")
        prompts = ["What is 17 * 23? Show the steps.", "Thanks! In one sentence: why do people sleep?"]
        if not a.no_tools:
            prompts[0] = "Use Python to compute 17 * 23, then tell me the result."
        for prompt in prompts:
            w.type("textarea[aria-label=Message]", prompt + "\ue007")
            time.sleep(1)
            w.wait("a reply", 300, w.idle)
        cards = w.all("[data-testid=tool-card] button")
        if cards:
            http("POST", f"{w.s}/element/{cards[0]}/click", {})
        w.shot(os.path.join(a.out, "desktop-chat.png"))

        w.click_text(".topbar button", "Sleep")
        w.click(".sleep-button")
        w.one(".modal")
        w.click_text(".modal button", "Sleep")
        w.wait("training", 600, lambda: bool(w.all("[data-testid=train-figs]")) or bool(w.all("[data-testid=morning-summary]")))
        if w.all("[data-testid=train-figs]"):
            time.sleep(8)
            w.shot(os.path.join(a.out, "desktop-sleep.png"))
        w.wait("the morning", 1200, lambda: bool(w.all("[data-testid=morning-summary]")))
        w.shot(os.path.join(a.out, "desktop-morning.png"))

        w.click_text(".topbar button", "Reviewer")
        w.click("[data-testid=episode]")
        w.wait("the episode", 60, lambda: bool(w.all(".episode-conv")))
        w.shot(os.path.join(a.out, "desktop-reviewer.png"))
        w.click_text(".tabs button", "Tokens")
        w.wait("tokens", 60, lambda: bool(w.all("[data-testid=token-view]")))
        w.shot(os.path.join(a.out, "desktop-tokens.png"))
        w.close()
    finally:
        driver.terminate()
        xvfb.terminate()


if __name__ == "__main__":
    main()
