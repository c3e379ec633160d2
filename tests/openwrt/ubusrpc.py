"""The rig's JSON-RPC client for ubus through uhttpd (/ubus), shared by
luci-check.py and api-check.py: a session login, a call, and the check
helpers both print with."""
import json
import urllib.request

# uhttpd-mod-ubus's JSON-RPC error for a call the session's ACL does not
# grant (and for a session that is not one).
ACCESS_DENIED = -32002


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
