#!/usr/bin/env python3
"""Drives luci-app-hydradns on a running rig (tests/openwrt/luci.sh boots
it): the rpcd plugin through LuCI's /ubus JSON-RPC with logged-in sessions,
then the pages in Debian's headless Chromium. Exits 1 on the first check
that fails, saying which; screenshots go to PREFIX-*.png.

    tests/openwrt/luci-check.py --port P --prefix target/artifacts/luci-opkg --rig OUT/root/rig

RIG is the rig's /rig seen from here: a file `unfiltered` put there is
moved to /var/run/hydradns.unfiltered (the watchdog's state file) by
tests/openwrt/rig/luci.sh, and a file `filtered` has it removed.
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
    # check_config runs `hydradns check-config` as root on what the caller
    # sends (issue 49: a read-only user fed it /dev/zero): write ACL only.
    zero = {"config": "config hydradns 'main'\n\toption resolv_file '/dev/zero'\n"}
    for method, args in (("pause", {"duration": "5m"}), ("update", {}), ("allow", {"domain": "x.example"}),
                         ("check_config", zero)):
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


def rig_says(rig, name, text=""):
    """Leaves `name` in the rig's /rig for tests/openwrt/rig/luci.sh, whole."""
    tmp = pathlib.Path(rig) / f".{name}.tmp"
    tmp.write_text(text)
    tmp.rename(pathlib.Path(rig) / name)


def browser_checks(base, ubus, root, prefix, rig):
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

        def phone_shot(name):
            """The page as a phone shows it (390 CSS px wide), then back to the desktop."""
            c.call("Emulation.setDeviceMetricsOverride", {"width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": True})
            time.sleep(1)
            shot(name)
            c.call("Emulation.clearDeviceMetricsOverride")
            time.sleep(0.5)

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
        # Reverted as LuCI's "Revert" button does (rpcd's uci revert is not in a login's ACL).
        status = c.js("L.Request.post(L.url('admin/uci/revert'), null, {query: {sid: L.env.sessionid, token: L.env.token}}).then(function(r){return r.status})")
        code, changes = ubus.call(c.js("L.env.sessionid"), "uci", "changes", {"config": "hydradns"})
        expect(status == 200 and not (changes or {}).get("changes"), f"the refused edit reverted: {status} {changes}")

        # Force DNS: its tab, the parser's defaults shown, an exemption
        # checked in the browser and saved through check-config into UCI.
        goto("settings", ".cbi-tabmenu li[data-tab=forcedns]")
        c.js("document.querySelector('.cbi-tabmenu li[data-tab=forcedns] a').click()")
        tab = "document.querySelector('.cbi-section-node-tabbed > [data-tab=forcedns]')"
        expect(c.wait_for(f"{tab}.offsetParent !== null", 10), "the Force DNS tab opens")
        shown = c.js(f"{tab}.innerText")
        for label in ("Force DNS", "Zones", "Ports", "Devices left alone", "answered by the router", "853"):
            expect(label in shown, f"the Force DNS tab shows {label}: {shown[:400]}")
        checked = c.js("document.querySelector('[id=\"cbid.hydradns.main.force_dns\"] input[type=checkbox]').checked")
        expect(checked is True, f"force DNS on, as the shipped config says: {checked}")
        ports = c.js("Array.from(document.querySelectorAll('[id=\"cbid.hydradns.main.force_dns_port\"] .item input')).map(function(i){return i.value})")
        expect(ports == ["53", "853"], f"ports: the parser's default shown: {ports}")
        zones = c.js("L.dom.callClassMethod(document.getElementById('cbid.hydradns.main.force_dns_zone'), 'getValue')")
        expect(zones == ["lan"], f"zones: the parser's default shown: {zones}")
        zone_choices = c.js("Array.from(document.querySelectorAll('[id=\"cbid.hydradns.main.force_dns_zone\"] li[data-value]')).map(function(l){return l.getAttribute('data-value')})")
        expect({"lan", "wan", "guest"} <= set(zone_choices or []), f"zones offered from the firewall's config: {zone_choices}")
        failopen = c.js("document.querySelector('[id=\"cbid.hydradns.main.fail_open\"] input[type=checkbox]').checked")
        expect(failopen is True, f"fail open on (General): {failopen}")

        def exempt(value):
            return c.js(f"""(function(){{var i=document.getElementById('widget.cbid.hydradns.main.force_dns_exempt');
                i.value={json.dumps(value)};i.dispatchEvent(new Event('keyup',{{bubbles:true}}));i.dispatchEvent(new Event('blur',{{bubbles:true}}));
                return i.classList.contains('cbi-input-invalid')}})()""")
        expect(exempt("laptop") is True, "an exemption that is no address is marked invalid in the browser")
        expect(exempt("192.0.2.7") is False, "an address is valid")
        c.js("document.getElementById('widget.cbid.hydradns.main.force_dns_exempt').nextElementSibling.click()")
        expect(c.wait_for("Array.from(document.querySelectorAll('[id=\"cbid.hydradns.main.force_dns_exempt\"] .item input')).some(function(i){return i.value=='192.0.2.7'})", 5),
               "the exemption is added to the list")
        # Faded in (bootstrap's .25 s transition) before it is shot.
        c.wait_for(f"getComputedStyle({tab}).opacity == '1'", 5)
        time.sleep(1)
        shot("settings-forcedns")
        phone_shot("settings-forcedns-390")
        c.js("document.querySelector('.cbi-page-actions .cbi-button-apply').click()")

        def committed(option):
            _, r = ubus.call(root, "uci", "get", {"config": "hydradns", "section": "main", "option": option})
            return (r or {}).get("value")
        for _ in range(120):
            if "192.0.2.7" in (committed("force_dns_exempt") or []):
                break
            time.sleep(0.25)
        expect("192.0.2.7" in (committed("force_dns_exempt") or []), f"Save & Apply: the exemption in UCI: {committed('force_dns_exempt')}")
        expect(committed("force_dns_port") is None and committed("force_dns_zone") is None,
               f"untouched defaults not written: {committed('force_dns_port')} {committed('force_dns_zone')}")

        # The Overview: force DNS as configured, then the warning while the
        # watchdog's state file says DNS is unfiltered. The browser is put
        # far from the router's time zone: the time shown must be the router's.
        c.call("Emulation.setTimezoneOverride", {"timezoneId": "Asia/Kathmandu"})
        goto("status", "#hydradns-force-dns")
        expect(text("#hydradns-force-dns") == "on (lan), 1 device exempt", f"overview: force DNS: {text('#hydradns-force-dns')}")
        expect(c.js("!document.getElementById('hydradns-unfiltered')"), "no unfiltered warning while filtered")
        since = int(time.time()) - 125
        rig_says(rig, "unfiltered", f"{since}: nothing listens on 127.0.0.1:5353\n")
        expect(c.wait_for("!!document.getElementById('hydradns-unfiltered')", 20), "the unfiltered warning appears (next poll)")
        _, info = ubus.call(root, "system", "info")
        _, st = ubus.call(root, "luci.hydradns", "status")
        expect(st["unfiltered_since"] == since, f"status --json: unfiltered_since: {st.get('unfiltered_since')}")
        offset = round((info["localtime"] - st["now"]) / 900) * 900
        hm = time.strftime("%H:%M", time.gmtime(since + offset))
        banner = text("#hydradns-unfiltered")
        expect(banner.startswith(f"DNS is unfiltered since {hm} (") and "(nothing listens on 127.0.0.1:5353)" in banner,
               f"the warning: since {hm} on the router's clock, and why: {banner}")
        expect(c.js("document.getElementById('hydradns-unfiltered').parentNode.firstElementChild.id") == "hydradns-unfiltered",
               "the warning comes first")
        shot("status-unfiltered")
        phone_shot("status-unfiltered-390")
        c.call("Page.navigate", {"url": f"{base}/cgi-bin/luci/admin/status/overview"})
        expect(c.wait_for("!!document.querySelector('#hydradns-overview-unfiltered')", 30), "the Status → Overview box warns too")
        expect(text("#hydradns-overview-unfiltered").startswith(f"DNS is unfiltered since {hm}"), f"the box's warning: {text('#hydradns-overview-unfiltered')}")
        shot("overview-unfiltered")
        rig_says(rig, "filtered")
        expect(c.wait_for("!document.querySelector('#hydradns-overview-unfiltered') && !!document.querySelector('#hydradns-overview-queries')", 30),
               "filtered again: the warning goes")
    finally:
        c.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--prefix", required=True)
    ap.add_argument("--rig", required=True, help="the rig's /rig, as seen from here")
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
        browser_checks(base, ubus, root, a.prefix, a.rig)
    except Failed as e:
        print("FAIL:", e)
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
