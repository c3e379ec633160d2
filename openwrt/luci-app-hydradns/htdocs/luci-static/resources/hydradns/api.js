'use strict';
'require baseclass';
'require dom';
'require rpc';
'require uci';
'require ui';

// The calls every HydraDNS page makes, and the small formatting helpers
// they share. The methods are those of /usr/libexec/rpcd/luci.hydradns;
// the replies are the binary's own JSON (`"schema": 1`, docs/operation.md).

var SCHEMA = 1;

// A pause "until resumed": long enough to outlast any evening, shown as
// such rather than as a date years away. A restart ends it, as any pause.
var FOREVER = '3650d';

var callStatus = rpc.declare({ object: 'luci.hydradns', method: 'status' });
var callServices = rpc.declare({ object: 'luci.hydradns', method: 'services' });
var callLog = rpc.declare({ object: 'luci.hydradns', method: 'log', params: [ 'limit', 'domain', 'client', 'blocked', 'before', 'outcome', 'list', 'group' ] });
var callCheck = rpc.declare({ object: 'luci.hydradns', method: 'check', params: [ 'name', 'client' ] });
var callUndo = rpc.declare({ object: 'luci.hydradns', method: 'undo', params: [ 'domain', 'undo' ] });
var callTop = rpc.declare({ object: 'luci.hydradns', method: 'top', params: [ 'kind', 'limit', 'since' ] });
var callCheckConfig = rpc.declare({ object: 'luci.hydradns', method: 'check_config', params: [ 'config' ] });
var callPause = rpc.declare({ object: 'luci.hydradns', method: 'pause', params: [ 'duration', 'group' ] });
var callResume = rpc.declare({ object: 'luci.hydradns', method: 'resume', params: [ 'group' ] });
var callUpdate = rpc.declare({ object: 'luci.hydradns', method: 'update' });
var callAllow = rpc.declare({ object: 'luci.hydradns', method: 'allow', params: [ 'domain', 'client' ] });
var callBlock = rpc.declare({ object: 'luci.hydradns', method: 'block', params: [ 'domain', 'client' ] });
var callRevert = rpc.declare({ object: 'luci.hydradns', method: 'revert' });
var callHistory = rpc.declare({ object: 'luci.hydradns', method: 'history' });
var callService = rpc.declare({ object: 'luci.hydradns', method: 'service', params: [ 'action' ] });
var callDevices = rpc.declare({ object: 'luci.hydradns', method: 'devices' });
var callExceptions = rpc.declare({ object: 'luci.hydradns', method: 'exceptions' });
var callAllowFor = rpc.declare({ object: 'luci.hydradns', method: 'allow_for', params: [ 'group', 'client', 'service', 'name', 'duration' ] });
var callBlockFor = rpc.declare({ object: 'luci.hydradns', method: 'block_for', params: [ 'group', 'client', 'service', 'name', 'duration' ] });
// procd's clock in the router's time zone: what LuCI's System box shows as
// Local Time. Asked only while a time of day is to be shown.
var callSystemInfo = rpc.declare({ object: 'system', method: 'info' });

// Data is text. LuCI's E() (dom.create) sets innerHTML from a child that
// is a bare string, and these pages show what comes from outside: list
// errors, list lines (`check`), the services catalogue, device names from
// the DHCP leases, /etc/ethers and the config. So every node of HydraDNS's
// pages is made here, with every child as text: strings and numbers become
// text nodes, nodes stay nodes, arrays are flattened. Each view takes it as
// its own E (`var E = api.E;`), so no string it passes can become markup.
function asText(children, out) {
	out = out || [];
	if (Array.isArray(children))
		children.forEach(function(c) { asText(c, out); });
	else if (children != null)
		out.push(dom.elem(children) ? children : String(children));
	return out;
}

function E(tag, attrs, children) {
	// E(tag, children): as LuCI's, but a node there is a child, not attributes.
	if (attrs == null || typeof attrs != 'object' || Array.isArray(attrs) || dom.elem(attrs)) {
		if (children === undefined)
			children = attrs;
		attrs = {};
	}
	return dom.create(tag, attrs, asText(children));
}

// The router's offset from UTC in seconds, once learnt; null before, or when
// this login may not ask (the pages then say how long ago instead).
var utcOffset = null;

// A reply the plugin refused, or JSON of a schema this page does not know,
// becomes a rejected promise with a message a person can read.
function checked(reply) {
	if (reply == null || typeof reply != 'object')
		throw new Error(_('No answer from the HydraDNS plugin'));
	// The plugin's own refusals carry no schema; the binary's JSON always
	// does, and its `error` (why the gateway is not running) is data.
	if (reply.schema == null && reply.error)
		throw new Error(reply.error);
	if (reply.schema != null && reply.schema != SCHEMA)
		throw new Error(_('HydraDNS speaks schema %s, this page schema %s: update luci-app-hydradns').format(reply.schema, SCHEMA));
	return reply;
}

function entries(reply) {
	return checked(reply).entries || [];
}

// One UCI value as `uci export` writes it: single quotes, a quote inside
// closed and escaped.
function quote(v) {
	return "'" + String(v).replace(/'/g, "'\\''") + "'";
}

// Which page edits which section types: a page's Save & Apply applies only
// when every staged change of hydradns is its own (uci's changes are one
// set per login, and applying commits them all).
var PAGES = {
	settings: { title: _('Settings'), types: [ 'hydradns', 'querylog', 'client', 'group', 'schedule', 'record' ] },
	lists: { title: _('Lists'), types: [ 'blocklist', 'allowlist' ] },
	// Devices applies each change at once: anything else staged is another page's.
	devices: { title: _('Devices'), types: [] }
};

return baseclass.extend({
	SCHEMA: SCHEMA,
	FOREVER: FOREVER,
	SETTINGS: 'settings',
	LISTS: 'lists',
	DEVICES: 'devices',

	// E() with text children (above); every view uses it as its E.
	E: E,

	// LuCI's modal dialog and notification banner with a title that is
	// text (LuCI makes a bare string title markup, as E does).
	modal: function(title, children) {
		return ui.showModal(title == null ? null : asText(title), asText(children));
	},
	notify: function(title, children, kind) {
		return ui.addNotification(title == null ? null : asText(title), asText(children), kind);
	},

	// Whether this login may change things (LuCI's view of the menu
	// entry's ACL, luci-app-hydradns write); pages without a HydraDNS menu
	// entry (LuCI's Status → Overview) count as read-only.
	canWrite: function() {
		return L.hasViewPermission() === true;
	},

	// `hydradns status --json`, with `utc_offset` (this page's, not the
	// binary's) while DNS is unfiltered or blocking paused, so that its
	// start or end can be shown in the router's local time.
	status: function() {
		return callStatus().then(checked).then(function(st) {
			var paused = st.stats && st.stats.paused_until > st.now;
			if (!(st.unfiltered_since || paused) || utcOffset != null)
				return Object.assign(st, { utc_offset: utcOffset });
			return callSystemInfo().then(function(info) {
				// Both clocks read within a second or two of each other, and
				// every time zone is a whole number of quarter hours off UTC.
				if (info && info.localtime > 0)
					utcOffset = Math.round((info.localtime - st.now) / 900) * 900;
			}).catch(function() {}).then(function() {
				return Object.assign(st, { utc_offset: utcOffset });
			});
		});
	},
	// A page of the log, newest first: rows older than row id `before` (0: the newest).
	log: function(limit, domain, client, blocked, before, outcome, list, group) {
		return callLog(limit || 100, domain || '', client || '', blocked ? 1 : 0, before || 0, outcome || '', list || '', group || '').then(entries);
	},
	// `hydradns check [--client CLIENT] NAME`'s words.
	check: function(name, client) { return callCheck(name, client || '').then(checked).then(function(r) { return r.output; }); },
	// The router's offset from UTC in seconds (null if this login may not
	// ask): its local clock against this browser's, to the quarter hour.
	utcOffset: function() {
		if (utcOffset != null)
			return Promise.resolve(utcOffset);
		return callSystemInfo().then(function(info) {
			if (info && info.localtime > 0)
				utcOffset = Math.round((info.localtime - Date.now() / 1000) / 900) * 900;
			return utcOffset;
		}).catch(function() { return null; });
	},
	top: function(kind, limit, since) { return callTop(kind, limit || 10, since || '24h').then(entries); },
	// `hydradns services --json`: the catalogue a group's services are picked from.
	services: function() { return callServices().then(checked).then(function(r) { return r.services || []; }); },
	checkConfig: function(text) { return callCheckConfig(text).then(checked); },
	pause: function(duration, group) { return callPause(duration, group || '').then(checked); },
	resume: function(group) { return callResume(group || '').then(checked); },
	update: function() { return callUpdate().then(checked); },
	// For every group, or given a device, for that device's groups; the
	// reply's `undo` goes to undo().
	allow: function(domain, client) { return callAllow(domain, client || '').then(checked); },
	block: function(domain, client) { return callBlock(domain, client || '').then(checked); },
	undo: function(domain, undo) { return callUndo(domain, undo).then(checked); },
	// Puts back the config the gateway runs with, over one its reload refused.
	revert: function() { return callRevert().then(checked); },
	// `hydradns stats --history --json`: 144 buckets of 10 minutes, oldest first.
	history: function() { return callHistory().then(checked).then(function(r) { return r.buckets || []; }); },
	// The init script's start, stop, restart, enable or disable.
	service: function(action) { return callService(action).then(checked); },
	// `hydradns devices --json`: every device known, with its groups and
	// its queries since the router's midnight.
	devices: function() { return callDevices().then(checked); },
	// `hydradns exceptions --json`: the allow and block exceptions whose
	// end has not passed.
	exceptions: function() { return callExceptions().then(checked).then(function(r) { return r.exceptions || []; }); },
	// An exception with an end (`hydradns allow|block … --for`): `action`
	// allow or block, `who` { group } or { client } (neither: one for
	// every group), `what` { service } or { name }, `duration` as the CLI
	// reads it, 'tomorrow' (until the router's next midnight) or '0' (ends
	// it). Answers the exceptions as they are after it.
	timed: function(action, who, what, duration) {
		return (action == 'block' ? callBlockFor : callAllowFor)(who.group || '', who.client || '', what.service || '', what.name || '', duration)
			.then(checked).then(function(r) { return r.exceptions || []; });
	},
	// Ends exception `e` (of exceptions()) before its time.
	end: function(e) {
		return this.timed(e.action, { group: e.group, client: e.client }, { service: e.service, name: e.name }, '0');
	},

	// What group `g` (of `hydradns status --json`'s stats.groups) does now:
	// its schedule's state and its blocking, a global pause first (it
	// stops every group's lists).
	groupState: function(g, st) {
		var all = this.pauseLeft(st.stats.paused_until, st.now), own = this.pauseLeft(g.paused_until, st.now);
		return {
			schedule: !g.schedule ? _('always')
				: g.active ? _('%s (active now)').format(g.schedule) : _('%s (inactive now: its lists do not apply)').format(g.schedule),
			blocking: all ? _('paused (all blocking), %s').format(all) : own ? _('paused, %s').format(own) : _('on')
		};
	},

	// A link to the Queries page showing what `filter` selects
	// ({ domain, client, blocked }).
	queriesLink: function(filter, text) {
		var q = Object.keys(filter).filter(function(k) { return filter[k]; }).map(function(k) {
			return k + '=' + encodeURIComponent(filter[k]);
		}).join('&');
		return E('a', { 'href': L.url('admin/services/hydradns/queries') + (q ? '?' + q : '') }, text);
	},

	// A LuCI table: a title row, then one row per array of cells; with no
	// rows, `empty` (if given) in a placeholder row. Each cell carries its
	// column's title (data-title), which LuCI's theme shows beside the value
	// where the table is too narrow for its columns (a phone).
	table: function(head, rows, id, empty) {
		var cells = function(tag, cs) {
			return cs.map(function(c, i) {
				var title = tag == 'td' && typeof head[i] == 'string' && head[i] ? head[i] : null;
				return E(tag, { 'class': tag, 'data-title': title }, c);
			});
		};
		var body = rows.map(function(r) { return E('tr', { 'class': 'tr' }, cells('td', r)); });
		if (!rows.length && empty)
			body = [ E('tr', { 'class': 'tr placeholder' }, E('td', { 'class': 'td' }, E('em', {}, empty))) ];
		return E('table', { 'class': 'table', 'id': id || null },
			[ E('tr', { 'class': 'tr table-titles' }, cells('th', head)) ].concat(body));
	},

	// A label and value row, as LuCI's status boxes have them; the value's
	// cell gets the id `id` (what the tests read).
	field: function(label, id, value) {
		return E('tr', { 'class': 'tr' }, [
			E('td', { 'class': 'td left', 'width': '33%' }, label),
			E('td', { 'class': 'td left', 'id': id }, value)
		]);
	},

	// n as a share of total, one decimal: "12.5 %"; "–" with no total.
	percent: function(n, total) {
		return total > 0 ? '%.1f %%'.format(100 * n / total) : '–';
	},

	// Seconds as "2d 3h", "5m 10s", "42s".
	duration: function(s) {
		s = Math.max(0, Math.floor(s));
		var d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600),
		    m = Math.floor(s % 3600 / 60), r = s % 60;
		if (d > 0) return '%dd %dh'.format(d, h);
		if (h > 0) return '%dh %dm'.format(h, m);
		if (m > 0) return '%dm %ds'.format(m, r);
		return '%ds'.format(r);
	},

	// What a pause that ends at `until` (Unix seconds, 0: none) looks like
	// at `now`: null when blocking is on.
	pauseLeft: function(until, now) {
		if (!until || until <= now)
			return null;
		if (until - now > 365 * 86400)
			return _('until resumed');
		return _('%s left').format(this.duration(until - now));
	},

	// Unix seconds `t` as a time of day on the router's clock ("12:03"), with
	// the date when it is not the router's today; null when the router's
	// time zone is not known.
	clock: function(t, st) {
		if (st.utc_offset == null)
			return null;
		var two = function(n) { return (n < 10 ? '0' : '') + n; };
		var d = new Date((t + st.utc_offset) * 1000), today = new Date((st.now + st.utc_offset) * 1000);
		var day = function(x) { return '%d-%s-%s'.format(x.getUTCFullYear(), two(x.getUTCMonth() + 1), two(x.getUTCDate())); };
		var hm = two(d.getUTCHours()) + ':' + two(d.getUTCMinutes());
		return day(d) == day(today) ? hm : day(d) + ' ' + hm;
	},

	// When Unix seconds `t` comes, on the router's clock where known, and
	// how long is left until it at `st.now`.
	ends: function(t, st) {
		var at = this.clock(t, st), left = this.duration(t - st.now);
		return at ? _('%s (%s left)').format(at, left) : _('in %s').format(left);
	},

	// Exceptions (of exceptions()) that have not ended at `st.now`, as a
	// table: what each does, for whom, over what, when it ends, and (for a
	// login that may write) End, which calls `onEnd(e)`. The rows carry
	// their exception's fields as data-* attributes (what the tests find).
	exceptionTable: function(list, st, onEnd, id, empty) {
		var rows = (list || []).filter(function(e) { return e.ends > st.now; }).sort(function(a, b) { return a.ends - b.ends; });
		return this.table([ _('Exception'), _('For'), _('Covers'), _('Ends'), '' ], rows.map(L.bind(function(e) {
			return [
				e.action == 'block' ? _('blocked') : _('allowed'),
				e.group != null ? _('group %s').format(e.group) : _('device %s').format(e.client),
				e.service != null ? _('service %s').format(e.service) : e.name,
				E('span', { 'class': 'hydradns-exception-ends' }, this.ends(e.ends, st)),
				!this.canWrite() || !onEnd ? '' : E('button', { 'class': 'cbi-button cbi-button-negative',
					'data-end': [ e.action, e.group != null ? 'group' : 'client', e.group != null ? e.group : e.client,
						e.service != null ? 'service' : 'name', e.service != null ? e.service : e.name ].join(' '),
					'click': ui.createHandlerFn(this, function() { return onEnd(e); }) }, _('End now'))
			];
		}, this)), id, empty);
	},

	// The warning the pages show while the watchdog has failed DNS open
	// (dnsmasq answers on its own, unfiltered: docs/operation.md, "When the
	// gateway fails"); null while DNS is filtered.
	unfiltered: function(st, id) {
		if (!st.unfiltered_since)
			return null;
		var at = this.clock(st.unfiltered_since, st), ago = this.duration(st.now - st.unfiltered_since);
		return E('div', { 'class': 'alert-message warning', 'id': id }, [
			E('strong', {}, at
				? _('DNS is unfiltered since %s (%s ago)').format(at, ago)
				: _('DNS has been unfiltered for %s').format(ago)),
			': ', _('the gateway does not answer (%s).').format(st.unfiltered_reason || _('no reason given')), ' ',
			_('dnsmasq answers every device on its own, without block lists; filtering resumes within 30 s of HydraDNS answering again.')
		]);
	},

	// The sections of a config (uci.js's view, staged changes included) as
	// the file the daemon reads, so check-config sees what Save & Apply
	// would write. Returns the text and, per line, the section it belongs to.
	configText: function(sections) {
		var lines = [], owners = [];
		sections.forEach(function(s) {
			lines.push('config ' + s['.type'] + (s['.anonymous'] ? '' : ' ' + quote(s['.name'])));
			owners.push(s['.name']);
			Object.keys(s).sort().forEach(function(k) {
				if (k.charAt(0) == '.')
					return;
				var v = s[k];
				(Array.isArray(v) ? v : [ v ]).forEach(function(one) {
					lines.push('\t' + (Array.isArray(v) ? 'list ' : 'option ') + k + ' ' + quote(one));
					owners.push(s['.name']);
				});
			});
			lines.push('');
			owners.push(s['.name']);
		});
		return { text: lines.join('\n'), owners: owners, lines: lines };
	},

	// The staged changes of hydradns that are not page `page`'s: the
	// sections (by name) another page changed and has not applied.
	foreign: function(changes, page) {
		var own = PAGES[page].types, names = [];
		(changes || []).forEach(function(ch) {
			var sid = ch[1], s = uci.get('hydradns', sid), type = ch[0] == 'add' ? ch[2] : (s ? s['.type'] : null);
			// A section removed is gone from uci's view, its type with it:
			// not counted (a removal leaves nothing half-made).
			if (type != null && own.indexOf(type) < 0 && names.indexOf(sid) < 0)
				names.push(sid);
		});
		return names;
	},

	// The page(s) whose staged changes keep page `page` from applying.
	otherPage: function(page) {
		return page == this.LISTS ? PAGES.settings.title : page == this.SETTINGS ? PAGES.lists.title
			: _('%s or %s').format(PAGES.settings.title, PAGES.lists.title);
	},

	// Save & Apply for a page of HydraDNS settings: save the form (staged
	// in the session); refuse while another HydraDNS page has changes
	// staged (applying would commit them too, unchecked by that page); have
	// the daemon's own check-config read the staged config, and apply only
	// if it passes; else say which line of which section it refused, and
	// leave the changes staged to be mended.
	saveApply: function(view, ev, mode, page) {
		return view.handleSave(ev).then(L.bind(function() {
			return uci.changes();
		}, this)).then(L.bind(function(changes) {
			var others = page ? this.foreign((changes || {}).hydradns, page) : [];
			if (others.length) {
				var other = this.otherPage(page);
				this.notify(_('Not applied: another page has unapplied changes'), E('p', { 'id': 'hydradns-foreign' },
					_('The %s page has changes that are saved but not applied (%s). Apply them there (they are checked then) or revert them with the header\'s Unsaved Changes → Revert; then apply this page.')
						.format(other, others.join(', '))), 'warning');
				return false;
			}
			var c = this.configText(uci.sections('hydradns'));
			return this.checkConfig(c.text).then(L.bind(function(r) {
				if (r.valid) {
					ui.changes.apply(mode == '0');
					return true;
				}
				this.notify(_('HydraDNS refuses this configuration'), this.explain(r.output, c), 'danger');
				return false;
			}, this));
		}, this)).catch(L.bind(function(e) {
			this.notify(null, E('p', {}, _('Cannot check the configuration: %s').format(e.message)), 'danger');
			return false;
		}, this));
	},

	// check-config's "config:LINE: problem" lines, each with the section
	// and the line of the text it read.
	explain: function(output, c) {
		return E('div', {}, String(output || '').split('\n').filter(function(l) { return l.length; }).map(function(l) {
			var m = /^config:(\d+):\s*(.*)$/.exec(l), n = m ? +m[1] : 0;
			if (!m || n < 1 || n > c.lines.length)
				return E('p', {}, l);
			return E('p', {}, [ E('strong', {}, _('Section %s').format(c.owners[n - 1])), ': ', m[2], E('br'),
				E('code', {}, c.lines[n - 1].trim()) ]);
		}));
	}
});
