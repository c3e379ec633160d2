#!/usr/bin/env python3
"""Writes openwrt/luci-app-hydradns/po/templates/hydradns.pot: every string
the LuCI pages translate (`_('...')` in the JS, the menu titles), as
openwrt/luci's build/i18n-scan.pl collects them. With --check, writes
nothing and exits 1 if the file is not what it would write (the test suite
runs that, so a new string cannot be left out of the template).

    scripts/luci-pot.py [--check]
"""
import json
import pathlib
import re
import sys

APP = pathlib.Path(__file__).resolve().parent.parent / "openwrt" / "luci-app-hydradns"
POT = APP / "po" / "templates" / "hydradns.pot"
# _('...') or _("..."), escapes kept as written, optionally with a context.
CALL = re.compile(r"""\b_\(\s*(?:'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)")\s*[,)]""")


def unescape(s):
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), s)


def po_quote(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t") + '"'


def strings():
    found = {}
    for js in sorted((APP / "htdocs").rglob("*.js")):
        rel = js.relative_to(APP)
        for n, line in enumerate(js.read_text().splitlines(), 1):
            for m in CALL.finditer(line):
                s = unescape(m.group(1) if m.group(1) is not None else m.group(2))
                found.setdefault(s, []).append(f"{rel}:{n}")
    for menu in sorted((APP / "root").rglob("menu.d/*.json")):
        rel = menu.relative_to(APP)
        for path, node in json.loads(menu.read_text()).items():
            if "title" in node:
                found.setdefault(node["title"], []).append(f"{rel}:{path}")
    return found


def render(found):
    out = ['msgid ""', 'msgstr "Content-Type: text/plain; charset=UTF-8"', ""]
    for s in sorted(found):
        for where in found[s]:
            out.append(f"#: {where}")
        out.append(f"msgid {po_quote(s)}")
        out.append('msgstr ""')
        out.append("")
    return "\n".join(out)


def main():
    text = render(strings())
    if "--check" in sys.argv[1:]:
        if not POT.exists() or POT.read_text() != text:
            print(f"{POT} is out of date: run scripts/luci-pot.py", file=sys.stderr)
            return 1
        return 0
    POT.parent.mkdir(parents=True, exist_ok=True)
    POT.write_text(text)
    print(f"{POT}: {len(strings())} strings")
    return 0


if __name__ == "__main__":
    sys.exit(main())
