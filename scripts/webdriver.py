"""The W3C WebDriver calls the window scripts share (package-check.py,
screenshot-window.py): one JSON request to WebKitWebDriver, its `value`
back, and an HTTP error turned into an exit that says which call failed."""

import json
import urllib.error
import urllib.request

# The key under which WebDriver returns an element reference.
ELEMENT = "element-6066-11e4-a52e-4f735466cecf"


def http(method, url, body=None, timeout=120):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read() or b"{}").get("value")
    except urllib.error.HTTPError as e:
        raise SystemExit(f"webdriver: {method} {url}: HTTP {e.code}: {e.read().decode(errors='replace')}")
