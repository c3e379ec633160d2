#!/usr/bin/env python3
"""The public ubus object `hydradns` as Home Assistant calls it: rpcd's
JSON-RPC at /ubus on a running rig (tests/openwrt/luci.sh boots it,
tests/openwrt/rig/luci.sh made the API login `homeassistant` with the ACL
hydradns-api and nothing else). Each method's reply is set beside what the
command line says inside the rig (asked through RIG/cli, answered in
RIG/cli.out); arguments that are not the CLI's words are refused with
nothing changed; calls outside the ACL are refused. Exits 1 on the first
check that fails, saying which.

    tests/openwrt/api-check.py --port P --rig OUT/root/rig
"""
import argparse
import json
import pathlib
import sys
import time



from ubusrpc import ACCESS_DENIED, Failed, Ubus, expect  # noqa: E402,F401



class Rig:
    """The command line inside the rig: tests/openwrt/rig/luci.sh answers a
    request put in RIG/cli (one of a fixed set) within half a second."""

    def __init__(self, path):
        self.path = pathlib.Path(path)

    def cli(self, request):
        out = self.path / "cli.out"
        out.unlink(missing_ok=True)
        tmp = self.path / ".cli.tmp"
        tmp.write_text(request)
        tmp.rename(self.path / "cli")
        for _ in range(200):
            if out.exists():
                return out.read_text()
            time.sleep(0.1)
        raise Failed(f"the rig did not answer {request!r}")

    def json(self, request):
        text = self.cli(request)
        try:
            return json.loads(text)
        except ValueError:
            raise Failed(f"the rig's {request}: not JSON: {text[:300]}")


def group_pauses(stats):
    return {g["name"]: g["paused_until"] for g in stats.get("groups", [])}


def state(rig):
    """What a refused call must leave as it was: the pauses, the exceptions
    and the config."""
    stats = rig.json("stats")
    return {"paused_until": stats["paused_until"], "groups": group_pauses(stats), "config": rig.cli("config"),
            "exceptions": rig.json("exceptions")}


ANSWERED = "93.184.215.14"  # wan.example, from the rig's stand-in for the ISP's resolver


def api_checks(ubus, rig):
    api = ubus.login("homeassistant", "apisecret")
    call = lambda method, args=None: ubus.call(api, "hydradns", method, args)  # noqa: E731

    # Reading: each the CLI's --json object, the same state.
    code, st = call("status")
    cli = rig.json("status")
    expect(code == 0 and st.get("schema") == 1 and st.get("running") is True, f"status: {code} {str(st)[:300]}")
    same = ("running", "config", "listen", "dnsmasq_mode")
    expect({k: st.get(k) for k in same} == {k: cli.get(k) for k in same} and
           [x["name"] for x in st["lists"]] == [x["name"] for x in cli["lists"]],
           f"status is `hydradns status --json`'s: {[st.get(k) for k in same]} vs {[cli.get(k) for k in same]}")
    code, stats = call("stats")
    cli = rig.json("stats")
    expect(code == 0 and stats["schema"] == 1 and stats["version"] == cli["version"] and
           stats["queries"] <= cli["queries"] and group_pauses(stats) == group_pauses(cli),
           f"stats is `hydradns stats --json`'s: {code} {str(stats)[:300]} vs {str(cli)[:300]}")
    code, dv = call("devices")
    cli = rig.json("devices")
    ids = lambda d: sorted((x.get("ip") or "", x.get("mac") or "", x.get("name") or "") for x in d["devices"])  # noqa: E731
    expect(code == 0 and dv["schema"] == 1 and ids(dv) == ids(cli) and any(d[0] == "127.0.0.9" for d in ids(dv)),
           f"devices is `hydradns devices --json`'s: {ids(dv)} vs {ids(cli)}")

    # Pause the default group for 10 minutes: the reply is the stats after
    # it, the CLI sees the same end, and a device of that group is
    # answered as if its lists were off (names never asked before, under
    # one rigads blocks; from a device LuCI's checks do not look at).
    expect(rig.cli("ask api1.ads.example").strip() == "0.0.0.0", "before: the default group's list blocks")
    code, r = call("pause", {"group": "default", "duration": "10m"})
    now = time.time()
    ends = group_pauses(r or {}).get("default", 0)
    expect(code == 0 and r.get("schema") == 1 and 590 <= ends - now <= 601 and r["paused_until"] == 0,
           f"pause default 10m: the stats after it: {code} {r}")
    expect(group_pauses(rig.json("stats")).get("default") == ends, "`hydradns stats` shows the group's pause, same end")
    expect(group_pauses(rig.json("status")["stats"]).get("default") == ends, "`hydradns status` too")
    expect(rig.cli("ask api2.ads.example").strip() != "0.0.0.0", "paused: the group's list does not block")
    # A whole number of seconds (what a YAML template may send) reads as the CLI's 600.
    code, r = call("pause", {"group": "default", "duration": 600})
    expect(code == 0 and 0 <= group_pauses(r).get("default", 0) - ends <= 2, f"pause default 600 (a number): {code} {r}")
    code, r = call("resume", {"group": "default"})
    expect(code == 0 and group_pauses(r).get("default") == 0, f"resume default: {code} {r}")
    expect(group_pauses(rig.json("stats")).get("default") == 0, "`hydradns stats`: the group's lists are on")
    expect(rig.cli("ask api3.ads.example").strip() == "0.0.0.0", "resumed: the group's list blocks again")

    # Exceptions with an end, each reply the exceptions after it, as
    # `hydradns exceptions --json` then lists them: YouTube for the default
    # group for an hour (docs/operation.md's example is the kids'), a name
    # under one rigads blocks allowed for the group, wan.example blocked for
    # one device (answered before, so from the cache but for the exception).
    expect(rig.cli("ask x.api-allowed.ads.example").strip() == "0.0.0.0", "before: a name under ads.example is blocked")
    expect(rig.cli("ask wan.example").strip() == ANSWERED, "before: wan.example answers")
    code, r = call("allow", {"group": "default", "service": "youtube", "for": "1h"})
    now = time.time()
    rows = (r or {}).get("exceptions") or []
    expect(code == 0 and r.get("schema") == 1 and len(rows) == 1 and
           {k: rows[0].get(k) for k in ("action", "group", "client", "service", "name")} ==
           {"action": "allow", "group": "default", "client": None, "service": "youtube", "name": None} and
           3590 <= rows[0]["ends"] - now <= 3601, f"allow youtube for default for 1h: {code} {r}")
    expect(rig.json("exceptions") == r, f"`hydradns exceptions --json` lists it, the same: {rig.cli('exceptions')}")
    code, r = call("allow", {"group": "default", "name": "api-allowed.ads.example", "for": "1h"})
    expect(code == 0 and len(r.get("exceptions") or []) == 2, f"allow api-allowed.ads.example for default for 1h: {code} {r}")
    expect(rig.cli("ask x.api-allowed.ads.example").strip() != "0.0.0.0", "the name and those under it are answered")
    expect(rig.cli("ask api4.ads.example").strip() == "0.0.0.0", "the rest of ads.example is still blocked")
    code, r = call("block", {"client": "127.0.0.10", "name": "wan.example", "for": 600})
    rows = (r or {}).get("exceptions") or []
    expect(code == 0 and {"action": "block", "group": None, "client": "127.0.0.10", "service": None, "name": "wan.example"} in
           [{k: x.get(k) for k in ("action", "group", "client", "service", "name")} for x in rows],
           f"block wan.example for 127.0.0.10 for 600 s: {code} {r}")
    expect(rig.cli("ask wan.example").strip() == "0.0.0.0", "wan.example is blocked for the device")
    code, r = call("exceptions")
    expect(code == 0 and r == rig.json("exceptions") and len(r["exceptions"]) == 3,
           f"exceptions is `hydradns exceptions --json`'s: {r} vs {rig.cli('exceptions')}")

    # Refused, with an error that says why, and nothing changed (the three
    # exceptions above kept as they are).
    before = state(rig)
    refused = [
        ("pause", {"group": "guests", "duration": "10 minutes"}),  # the plugin: not a duration's shape
        ("pause", {"group": "guests", "duration": "10x"}),  # hydradns: not a duration
        ("pause", {"group": "guests", "duration": 1.5}),  # the plugin: not a string or a whole number
        ("pause", {"group": "guests", "duration": -600}),
        ("pause", {"group": "nosuchgroup", "duration": "10m"}),  # hydradns: no such group
        ("pause", {"group": "--json", "duration": "10m"}),  # the plugin: reads as an option
        ("pause", {"group": "guests; reboot", "duration": "10m"}),
        ("pause", {"group": "$(reboot)", "duration": "10m"}),
        ("pause", {"group": ["guests"], "duration": "10m"}),  # the plugin: not a string
        ("pause", {"group": "g" * 65, "duration": "10m"}),  # the plugin: too long
        ("pause", {"group": "guests", "duraton": "10m"}),  # the plugin: not an argument pause takes
        ("resume", {"group": "guests", "extra": "1"}),
        ("status", {"x": "y"}),
        ("allow", {"group": "guests", "name": "ads.example"}),  # no `for`
        ("allow", {"group": "guests", "client": "127.0.0.9", "name": "ads.example", "for": "1h"}),  # both
        ("allow", {"group": "guests", "service": "youtube", "name": "ads.example", "for": "1h"}),  # both
        ("allow", {"name": "ads.example", "for": "1h"}),  # whose?
        ("allow", {"group": "guests", "for": "1h"}),  # what?
        ("allow", {"group": "guests", "name": "ads example", "for": "1h"}),
        ("allow", {"group": "guests", "name": "-ads.example", "for": "1h"}),
        ("allow", {"group": "guests", "name": "ads.example", "for": "-1h"}),
        ("block", {"client": "`reboot`", "name": "x.example", "for": "1h"}),
        ("block", {"client": "127.0.0.9", "service": "you tube", "for": "1h"}),
        ("allow", {"group": "default", "service": "nosuchservice", "for": "1h"}),  # hydradns: not in its catalogue
        ("allow", {"group": "nosuchgroup", "service": "youtube", "for": "1h"}),  # hydradns: no such group
        ("allow", {"group": "default", "name": "a..example", "for": "1h"}),  # hydradns: not a domain name
        ("allow", {"group": "default", "service": "youtube", "for": "400d"}),  # hydradns: longer than it keeps
        ("allow", {"group": "default", "service": "youtube", "for": "1x"}),  # hydradns: not a duration
        ("block", {"client": "nosuchdevice", "name": "x.example", "for": "1h"}),  # hydradns: no such device
    ]
    for method, args in refused:
        code, r = call(method, args)
        expect(code == 0 and isinstance(r, dict) and set(r) == {"error"} and r["error"],
               f"refused: {method} {json.dumps(args)}: {code} {r}")
        print("   ", method, json.dumps(args), "->", r["error"])
    after = state(rig)
    expect(after == before, f"the refused calls changed nothing: {before} vs {after}")

    # Outside the ACL: LuCI's object, UCI, files, the system; and the API's
    # object for nobody logged in.
    for obj, method, args in (("luci.hydradns", "status", {}), ("luci.hydradns", "pause", {"duration": "5m"}),
                              ("uci", "get", {"config": "rpcd"}), ("file", "read", {"path": "/etc/shadow"}),
                              ("file", "exec", {"command": "/bin/true"}), ("system", "info", {}),
                              ("session", "list", {})):
        code, r = ubus.call(api, obj, method, args)
        expect(code == ACCESS_DENIED and r is None, f"the API login may not call {obj} {method}: {code} {r}")
    code, _ = ubus.call("0" * 32, "hydradns", "status")
    expect(code == ACCESS_DENIED, f"no session: hydradns status refused: {code}")
    viewer = ubus.login("viewer", "viewer")
    code, _ = ubus.call(viewer, "hydradns", "pause", {"duration": "5m"})
    expect(code == ACCESS_DENIED, f"LuCI's read-only login may not pause through the API object: {code}")
    expect(state(rig) == before, "the calls outside the ACL changed nothing")

    # `for: 0` takes each back: none left, and the names answer as before.
    for method, args in (("allow", {"group": "default", "service": "youtube", "for": "0"}),
                         ("allow", {"group": "default", "name": "api-allowed.ads.example", "for": 0}),
                         ("block", {"client": "127.0.0.10", "name": "wan.example", "for": "0"})):
        code, r = call(method, args)
        expect(code == 0 and "error" not in r, f"{method} {json.dumps(args)}: {code} {r}")
    expect(r["exceptions"] == [] and rig.json("exceptions") == r, f"none left: {r} {rig.cli('exceptions')}")
    expect(rig.cli("ask wan.example").strip() == ANSWERED, "wan.example answers the device again")
    expect(rig.cli("ask y.api-allowed.ads.example").strip() == "0.0.0.0", "the allowed name is blocked again")

    # A session ends after its timeout without a call (docs/operation.md):
    # refused as no session is, until the caller logs in again.
    r = ubus.rpc("call", ["0" * 32, "session", "login", {"username": "homeassistant", "password": "apisecret", "timeout": 1}])
    short = r["result"][1]["ubus_rpc_session"]
    code, _ = ubus.call(short, "hydradns", "status")
    expect(code == 0, f"a session of 1 s, used at once: {code}")
    time.sleep(2.5)
    code, _ = ubus.call(short, "hydradns", "status")
    expect(code == ACCESS_DENIED, f"the same session 2.5 s later is refused: {code}")
    return api


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--rig", required=True, help="the rig's /rig, as seen from here")
    a = ap.parse_args()
    started = time.time()
    try:
        api_checks(Ubus(f"http://127.0.0.1:{a.port}"), Rig(a.rig))
    except Failed as e:
        print("FAIL:", e)
        return 1
    print(f"PASS api ({time.time() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
