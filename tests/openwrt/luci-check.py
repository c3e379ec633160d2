#!/usr/bin/env python3
"""Drives luci-app-hydradns on a running rig (tests/openwrt/luci.sh boots
it): the rpcd plugin through LuCI's /ubus JSON-RPC with logged-in sessions,
then the pages in Debian's headless Chromium. Exits 1 on the first check
that fails, saying which; screenshots go to PREFIX-*.png.

    tests/openwrt/luci-check.py --port P --prefix target/artifacts/luci-opkg
"""
import argparse
import importlib.util
import json
import pathlib
import sys
import time
import urllib.request

ACCESS_DENIED = -32002
RIG = pathlib.Path(__file__).resolve().parents[3] / "shared" / "openwrt-userland"


class Failed(Exception):
    pass


def expect(cond, what):
    if not cond:
        raise Failed(what)
    print("ok:", what.split(":")[0])


class Ubus:
    def __init__(self, base):
        self.url = base + "/ubus"
        self.n = 0

    def rpc(self, method, params):
        self.n += 1
        body = json.dumps({"jsonrpc": "2.0", "id": self.n, "method": method, "params": params}).encode()
        req = urllib.request.Request(self.url, body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read())

    def login(self, user, password):
        r = self.rpc("call", ["0" * 32, "session", "login", {"username": user, "password": password}])
        res = r.get("result", [])
        if len(res) < 2 or res[0] != 0:
            raise Failed(f"login {user}: {r}")
        return res[1]["ubus_rpc_session"]

    def call(self, sid, obj, method, args=None):
        """(status, reply): status 0 and the reply, a ubus status, or the JSON-RPC error code."""
        r = self.rpc("call", [sid, obj, method, args or {}])
        if "error" in r:
            return r["error"]["code"], None
        res = r["result"]
        return res[0], (res[1] if len(res) > 1 else None)


def plugin_checks(ubus):
    root = ubus.login("root", "rig")
    viewer = ubus.login("viewer", "viewer")

    code, _ = ubus.call("0" * 32, "luci.hydradns", "status")
    expect(code == ACCESS_DENIED, f"anonymous status refused: {code}")

    code, st = ubus.call(root, "luci.hydradns", "status")
    expect(code == 0 and st["running"] and st["schema"] == 1, f"status as root: {code} {st}")
    expect(st["stats"]["queries"] >= 5 and st["stats"]["counters"]["blocked"] >= 3, f"the rig's queries counted: {st['stats']}")

    # The query log commits its batch within a second.
    for _ in range(30):
        code, log = ubus.call(root, "luci.hydradns", "log", {"limit": 100})
        if code == 0 and sum(e["outcome"] == "blocked" for e in log.get("entries", [])) >= 3:
            break
        time.sleep(0.2)
    expect(code == 0 and any(e["name"] == "ads.example" and e["outcome"] == "blocked" for e in log["entries"]),
           f"log shows the blocked queries: {log}")
    code, top = ubus.call(root, "luci.hydradns", "top", {"kind": "blocked", "limit": 5})
    expect(code == 0 and top["entries"][0]["key"] == "ads.example" and top["entries"][0]["count"] >= 3, f"top blocked: {top}")
    code, bad = ubus.call(root, "luci.hydradns", "log", {"limit": 100, "domain": "--help"})
    expect(code == 0 and "error" in bad, f"an argument that reads as an option is refused: {bad}")
    code, bad = ubus.call(root, "luci.hydradns", "log", {"limit": 100000})
    expect(code == 0 and "error" in bad, f"more than a page of rows is refused: {bad}")
    code, bad = ubus.call(root, "luci.hydradns", "top", {"kind": "x; reboot"})
    expect(code == 0 and "error" in bad, f"a kind outside the fixed set is refused: {bad}")

    code, chk = ubus.call(root, "luci.hydradns", "check_config",
                          {"config": "config hydradns 'main'\n\toption cache_size 'lots'\n"})
    expect(code == 0 and chk["valid"] is False and chk["output"].startswith("config:2:"), f"check_config refuses: {chk}")
    code, chk = ubus.call(root, "luci.hydradns", "check_config", {"config": "config hydradns 'main'\n\toption cache_size '100'\n"})
    expect(code == 0 and chk["valid"] is True, f"check_config passes: {chk}")

    code, st = ubus.call(viewer, "luci.hydradns", "status")
    expect(code == 0 and st["running"], f"viewer (read ACL) sees status: {code}")
    for method, args in (("pause", {"duration": "5m"}), ("update", {}), ("allow", {"domain": "x.example"})):
        code, _ = ubus.call(viewer, "luci.hydradns", method, args)
        expect(code == ACCESS_DENIED, f"viewer may not {method}: {code}")
    code, _ = ubus.call(viewer, "uci", "set", {"config": "hydradns", "section": "main", "values": {"cache_size": "1"}})
    expect(code == ACCESS_DENIED, f"viewer may not write hydradns's UCI: {code}")
    return root


def load_chrome():
    spec = importlib.util.spec_from_file_location("luci_screenshot", RIG / "luci-screenshot.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.Chrome


def browser_checks(base, ubus, root, prefix):
    chrome = load_chrome()("/usr/bin/chromium", 1280, 1100)
    c = chrome
    try:
        tid = c.call("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        c.session = c.call("Target.attachToTarget", {"targetId": tid, "flatten": True}, session=False)["sessionId"]
        c.call("Page.enable")
        c.call("Runtime.enable")

        def shot(name):
            import base64
            png = base64.b64decode(c.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})["data"])
            path = f"{prefix}-{name}.png"
            pathlib.Path(path).write_bytes(png)
            print("screenshot:", path)

        def text(sel):
            return c.js(f"(function(){{var e=document.querySelector({json.dumps(sel)});return e?e.innerText.trim():null}})()")

        def goto(page, ready_sel):
            c.call("Page.navigate", {"url": f"{base}/cgi-bin/luci/admin/services/hydradns/{page}"})
            expect(c.wait_for(f"!!document.querySelector({json.dumps(ready_sel)})", 30), f"page {page} rendered ({ready_sel})")

        c.call("Page.navigate", {"url": f"{base}/cgi-bin/luci/admin/services/hydradns/status"})
        expect(c.wait_for("!!document.querySelector('input[name=luci_password]')", 30), "login form")
        c.js("""(function(){var u=document.querySelector('input[name=luci_username]'),p=document.querySelector('input[name=luci_password]');
            u.value='root';p.value='rig';var b=p.form.querySelector('button[type=submit], input[type=submit], .cbi-button-positive');
            if(b)b.click();else p.form.submit();return true})()""")
        expect(c.wait_for("typeof L=='object' && !!L.env.sessionid && !!document.querySelector('#hydradns-queries')", 30),
               "logged in, the overview shows the queries")

        _, st = ubus.call(root, "luci.hydradns", "status")
        shown = int(text("#hydradns-queries"))
        expect(shown >= 5 and shown <= st["stats"]["queries"] + 2, f"overview's queries are the gateway's: {shown} vs {st['stats']['queries']}")
        blocked = text("#hydradns-blocked")
        expect(blocked.startswith(str(st["stats"]["counters"]["blocked"]) + " ("), f"overview's blocked: {blocked}")
        lists = text("#hydradns-status")
        expect("rigads" in lists, f"overview lists the list: {lists}")
        expect(text("#hydradns-blocking") == "On", f"blocking on: {text('#hydradns-blocking')}")
        shot("status")

        # The box on LuCI's own Status → Overview, beside System and Memory.
        c.call("Page.navigate", {"url": f"{base}/cgi-bin/luci/admin/status/overview"})
        expect(c.wait_for("!!document.querySelector('#hydradns-overview-queries')", 30), "the Status → Overview box")
        boxed = int(text("#hydradns-overview-queries"))
        expect(shown <= boxed <= shown + 20, f"the box's queries: {boxed} vs {shown}")
        expect(text("#hydradns-overview-blocking") == "On", f"the box's blocking: {text('#hydradns-overview-blocking')}")
        shot("overview")
        goto("status", "#hydradns-pause-5m")

        c.js("document.querySelector('#hydradns-pause-5m').click()")
        expect(c.wait_for("(document.querySelector('#hydradns-blocking')||{}).innerText.indexOf('Paused') == 0", 20),
               "the pause button pauses (the page says so)")
        _, st = ubus.call(root, "luci.hydradns", "status")
        left = st["stats"]["paused_until"] - st["now"]
        expect(290 <= left <= 300, f"the gateway is paused for 5 minutes: {left} s left")
        expect("left" in text("#hydradns-blocking"), f"countdown: {text('#hydradns-blocking')}")
        shot("paused")

        goto("queries", "#hydradns-top-blocked")
        top = text("#hydradns-top-blocked")
        expect("ads.example" in top, f"top blocked names: {top}")
        expect("ads.example" in text("#hydradns-log"), "the last queries")
        shot("queries")
        c.js("document.querySelector('#hydradns-top-blocked button[data-name=\"ads.example\"]').click()")
        expect(c.wait_for("document.body.innerText.indexOf('ads.example is allowed for every group') >= 0", 20),
               "Allow says what it did")
        _, sec = ubus.call(root, "uci", "get", {"config": "hydradns", "section": "luci_allow"})
        expect("ads.example" in (sec or {}).get("values", {}).get("domain", []), f"Allow wrote UCI: {sec}")

        goto("lists", ".cbi-map")
        view = c.js("document.querySelector('#view').innerText")
        expect("Block lists" in view and "Allow lists" in view, f"lists page: {view[:300]}")
        expect(c.wait_for("!!document.querySelector('#hydradns-update')", 10), "Update lists now button")
        shot("lists")

        goto("settings", ".cbi-map")
        # A value only the daemon can judge: Save & Apply must show its refusal and apply nothing.
        c.js("""(function(){var i=document.querySelector('input[id$=".upstream_timeout"]');
            i.value='soon';i.dispatchEvent(new Event('input',{bubbles:true}));i.dispatchEvent(new Event('change',{bubbles:true}));return true})()""")
        c.js("document.querySelector('.cbi-page-actions .cbi-button-apply, .cbi-page-actions button.cbi-button-apply').click()")
        expect(c.wait_for("document.body.innerText.indexOf('HydraDNS refuses this configuration') >= 0", 20),
               "Save & Apply shows check-config's refusal")
        shot("settings-refused")
        # What the form staged: the edit, and at most defaults written out
        # for options the file lacks; nothing of the file removed or changed
        # (LuCI drops an option equal to a form default unless told not to).
        code, changes = ubus.call(c.js("L.env.sessionid"), "uci", "changes", {"config": "hydradns"})
        _, committed = ubus.call(root, "uci", "get", {"config": "hydradns"})
        staged = changes["changes"] if code == 0 else []
        expect(["set", "main", "upstream_timeout", "soon"] in staged, f"the edit is staged: {staged}")
        expect(all(ch[0] == "set" and (ch[2] == "upstream_timeout" or ch[2] not in committed["values"][ch[1]])
                   for ch in staged), f"nothing else of the file changed: {staged}")
        _, cfg = ubus.call(root, "uci", "get", {"config": "hydradns", "section": "main", "option": "upstream_timeout"})
        expect((cfg or {}).get("value") == "2s", f"nothing applied: {cfg}")
    finally:
        c.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--prefix", required=True)
    a = ap.parse_args()
    base = f"http://127.0.0.1:{a.port}"
    ubus = Ubus(base)
    deadline = time.time() + 30
    while True:
        try:
            urllib.request.urlopen(base + "/", timeout=5).read()
            break
        except OSError:
            if time.time() > deadline:
                print("FAIL: LuCI does not answer at", base)
                return 1
            time.sleep(0.5)
    try:
        root = plugin_checks(ubus)
        browser_checks(base, ubus, root, a.prefix)
    except Failed as e:
        print("FAIL:", e)
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
