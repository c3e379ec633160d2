'use strict';
'require view';
'require dom';
'require poll';
'require ui';
'require uci';
'require hydradns.api as api';

// LuCI's E() makes a bare string child markup; api.E makes every child
// text, as what this page shows comes from outside (api.js).
var E = api.E;

// Queries: the top blocked names and the busiest clients of the last day,
// and the whole retained log, 100 rows a page, newest first, in the
// router's local time; filtered by name, device, a group's devices,
// outcome and list;
// refreshed every 5 s on the first page if asked. Each row has "Why?"
// (`hydradns check --client` for that device and name) and Allow or Block,
// which asks for how long and for whom: always (the device's groups' or
// every group's LuCI list, with an Undo), or for 1 hour or until tomorrow
// (an exception with an end, `hydradns allow|block --for`, for the device
// or for every group, with End now). Filtered to one device, the page
// shows its groups and its exceptions. Read from the query log (`hydradns
// log --json`, `top --json`).

// How long Allow and Block hold: the plugin's durations. "Until tomorrow"
// is until the router's next local midnight: a day's exception ends with
// the day, whenever it was made.
var HOW_LONG = [ [ 'always', _('always') ], [ '1h', _('for 1 hour') ], [ 'tomorrow', _('until tomorrow (midnight)') ] ];

var PAGE = 100;
var OUTCOMES = [ 'blocked', 'forwarded', 'cached', 'stale', 'failed', 'local', 'record', 'paused' ];

return view.extend({
	filter: { domain: '', client: '', blocked: false, outcome: '', list: '', group: '' },

	load: function() {
		// The Overview's links arrive with ?domain=…&client=…&blocked=1.
		var q = new URLSearchParams((window.location && window.location.search) || '');
		this.filter = { domain: q.get('domain') || '', client: q.get('client') || '', blocked: q.get('blocked') == '1',
			outcome: q.get('outcome') || '', list: q.get('list') || '', group: q.get('group') || '' };
		// The ids of the pages before this one (empty: the newest page).
		this.pages = [];
		this.before = 0;
		return Promise.all([
			api.top('blocked', 10).catch(function(e) { return e; }),
			api.top('clients', 10).catch(function(e) { return e; }),
			this.query().catch(function(e) { return e; }),
			api.utcOffset(),
			// Filtered to one device (the Devices page's links): its page.
			this.filter.client ? L.resolveDefault(api.devices(), null) : null,
			this.filter.client ? L.resolveDefault(api.status(), null) : null,
			L.resolveDefault(uci.load('hydradns')),
			this.filter.client ? L.resolveDefault(api.exceptions(), null) : null
		]);
	},

	query: function() {
		var f = this.filter;
		// The group's devices are found by the daemon's own client rules.
		return api.log(PAGE, f.domain, f.client, f.blocked, this.before, f.outcome, f.list, f.client ? '' : f.group);
	},

	render: function(data) {
		this.utcOffset = data[3];
		this.clients = data[1] instanceof Error ? [] : data[1];
		this.recent = E('div', { 'id': 'hydradns-recent' });
		this.fillRecent(data[2]);
		poll.add(L.bind(function() {
			// Only the newest page follows the log, and only when asked.
			if (!this.autoRefresh || this.before)
				return Promise.resolve();
			return this.reload();
		}, this), 5);
		return E([], [
			E('h2', {}, _('HydraDNS: queries')),
			this.device(data[4], data[5], data[7]),
			E('div', { 'class': 'cbi-section' }, [
				E('h3', {}, _('Top blocked names, last 24 hours')),
				this.topBlocked(data[0])
			]),
			E('div', { 'class': 'cbi-section' }, [
				E('h3', {}, _('Top clients, last 24 hours')),
				this.topClients(data[1])
			]),
			E('div', { 'class': 'cbi-section' }, [
				E('h3', {}, _('The query log')),
				this.filterBar(),
				this.recent
			])
		]);
	},

	// The device the page is filtered to (by address, MAC or name): who it
	// is, its groups, whether each group's schedule applies now and whether
	// its blocking is paused, and the exceptions made for it (by the
	// address, MAC or name they were given). Its queries are the log below.
	device: function(devices, st, exceptions) {
		var c = this.filter.client, lc = c.toLowerCase();
		var d = ((devices || {}).devices || []).filter(function(x) {
			return x.ip == c || (x.mac && x.mac == lc) || (x.name && x.name.toLowerCase() == lc);
		})[0];
		if (!d)
			return null;
		var groups = (st && st.stats && st.stats.groups) || [];
		return E('div', { 'class': 'cbi-section', 'id': 'hydradns-device' }, [
			E('h3', {}, _('Device: %s').format(d.name || d.ip || d.mac)),
			E('table', { 'class': 'table' }, [
				api.field(_('Address'), 'hydradns-device-ip', d.ip || '–'),
				api.field(_('MAC'), 'hydradns-device-mac', d.mac || '–'),
				api.field(_('Rule'), 'hydradns-device-rule', d.rule
					? _('config client "%s" (Settings → Devices)').format(d.rule) : _('none: in the group "default"')),
				api.field(_('Today'), 'hydradns-device-today', _('%d queries, %d blocked').format(d.queries, d.blocked))
			]),
			api.table([ _('Group'), _('Schedule'), _('Blocking') ], (d.groups || []).map(function(name) {
				var g = groups.filter(function(x) { return x.name == name; })[0];
				if (!g || !st.stats)
					return [ name, '–', '–' ];
				var state = api.groupState(g, st);
				return [ name, state.schedule, state.blocking ];
			}), 'hydradns-device-groups'),
			E('h4', {}, _('Exceptions for this device')),
			this.fillDeviceExceptions(E('div', { 'id': 'hydradns-device-exceptions' }), d, exceptions)
		]);
	},

	// Device `d`'s exceptions in `box`, which it returns; ending one shows
	// them as the reply has them.
	fillDeviceExceptions: function(box, d, list) {
		if (list == null) {
			dom.content(box, E('em', {}, _('The exceptions cannot be read.')));
			return box;
		}
		var keys = [ d.ip, d.mac, d.name ].filter(function(k) { return k; }).map(function(k) { return k.toLowerCase(); });
		var mine = list.filter(function(e) { return e.client != null && keys.indexOf(String(e.client).toLowerCase()) >= 0; });
		dom.content(box, api.exceptionTable(mine, this.clockState(), L.bind(function(e) {
			return api.end(e).then(L.bind(function(after) { this.fillDeviceExceptions(box, d, after); }, this), function(err) {
				api.notify(null, E('p', {}, _('Cannot end the exception: %s').format(err.message)), 'danger');
			});
		}, this), null, _('None now')));
		return box;
	},

	// What api.clock and api.ends need: the router's offset and now.
	clockState: function() {
		return { utc_offset: this.utcOffset, now: Math.floor(Date.now() / 1000) };
	},

	failed: function(e) {
		return E('p', { 'class': 'alert-message warning' }, _('The query log cannot be read: %s').format(e.message));
	},

	topBlocked: function(rows) {
		if (rows instanceof Error)
			return this.failed(rows);
		return api.table([ _('Name'), _('Times blocked'), '' ], rows.map(L.bind(function(r) {
			return [ r.key, String(r.count), this.button('allow', r.key, '') ];
		}, this)), 'hydradns-top-blocked', _('Nothing blocked yet'));
	},

	topClients: function(rows) {
		if (rows instanceof Error)
			return this.failed(rows);
		return api.table([ _('Client'), _('Queries') ], rows.map(function(r) {
			return [ r.key, String(r.count) ];
		}), 'hydradns-top-clients', _('No queries yet'));
	},

	filterBar: function() {
		var f = this.filter;
		var domain = E('input', { 'type': 'text', 'class': 'cbi-input-text', 'id': 'hydradns-filter-domain',
			'placeholder': _('name, * as wildcard'), 'value': f.domain });
		// The devices of the last day, by name where one is known; any
		// address, MAC or name may be typed.
		var known = E('datalist', { 'id': 'hydradns-known-clients' }, this.clients.map(function(r) {
			var m = /^(.*) \(([^()]+)\)$/.exec(r.key);
			return E('option', { 'value': m ? m[2] : r.key }, m ? m[1] : r.key);
		}));
		var client = E('input', { 'type': 'text', 'class': 'cbi-input-text', 'id': 'hydradns-filter-client', 'list': 'hydradns-known-clients',
			'placeholder': _('device: address, MAC or name'), 'value': f.client });
		var outcome = E('select', { 'class': 'cbi-input-select', 'id': 'hydradns-filter-outcome' },
			[ E('option', { 'value': '' }, _('any outcome')) ].concat(OUTCOMES.map(function(o) {
				return E('option', { 'value': o, 'selected': (f.outcome || (f.blocked ? 'blocked' : '')) == o ? '' : null }, o);
			})));
		var list = E('input', { 'type': 'text', 'class': 'cbi-input-text', 'id': 'hydradns-filter-list',
			'placeholder': _('list'), 'value': f.list });
		var groups = [ 'default' ].concat(uci.sections('hydradns', 'group').map(function(g) { return g['.name']; }));
		var group = E('select', { 'class': 'cbi-input-select', 'id': 'hydradns-filter-group' },
			[ E('option', { 'value': '' }, _('any group')) ].concat(groups.map(function(g) {
				return E('option', { 'value': g, 'selected': f.group == g ? '' : null }, _('group %s').format(g));
			})));
		var blocked = E('input', { 'type': 'checkbox', 'id': 'hydradns-filter-blocked', 'checked': f.blocked ? true : null });
		var auto = E('input', { 'type': 'checkbox', 'id': 'hydradns-auto-refresh' });
		auto.addEventListener('change', L.bind(function() { this.autoRefresh = auto.checked; }, this));
		return E('div', { 'class': 'cbi-section-actions', 'style': 'margin-bottom:1em' }, [
			domain, ' ', client, known, ' ', group, ' ', outcome, ' ', list, ' ', E('label', {}, [ blocked, ' ', _('blocked only') ]), ' ',
			E('button', { 'class': 'cbi-button cbi-button-action', 'id': 'hydradns-filter-apply',
				'click': ui.createHandlerFn(this, function() {
					this.filter = { domain: domain.value.trim(), client: client.value.trim(), blocked: blocked.checked,
						outcome: outcome.value, list: list.value.trim(), group: group.value };
					this.pages = [];
					this.before = 0;
					return this.reload();
				}) }, _('Filter')), ' ',
			E('label', {}, [ auto, ' ', _('refresh every 5 s') ])
		]);
	},

	reload: function() {
		return this.query().then(L.bind(this.fillRecent, this), L.bind(this.fillRecent, this));
	},

	// Unix milliseconds as the router's local date and time.
	when: function(ms) {
		if (this.utcOffset == null)
			return new Date(ms).toLocaleString();
		var d = new Date(ms + this.utcOffset * 1000), two = function(n) { return (n < 10 ? '0' : '') + n; };
		return '%d-%s-%s %s:%s:%s'.format(d.getUTCFullYear(), two(d.getUTCMonth() + 1), two(d.getUTCDate()),
			two(d.getUTCHours()), two(d.getUTCMinutes()), two(d.getUTCSeconds()));
	},

	fillRecent: function(rows) {
		if (rows instanceof Error)
			return dom.content(this.recent, this.failed(rows));
		this.rows = rows;
		var first = this.before ? this.pages.length * PAGE + 1 : 1;
		dom.content(this.recent, [
			api.table([ _('Time'), _('Client'), _('Name'), _('Type'), _('Answer'), _('Took'), '' ],
				rows.map(L.bind(function(r) {
					var blocked = r.outcome == 'blocked';
					return [
						this.when(r.unix_ms),
						r.client_name ? E('span', { 'title': r.client }, r.client_name) : r.client,
						r.name, r.type,
						r.list ? '%s (%s)'.format(r.outcome, r.list) : '%s, %s'.format(r.outcome, r.rcode),
						r.latency_us >= 1000 ? '%.1f ms'.format(r.latency_us / 1000) : '%d µs'.format(r.latency_us),
						E('span', {}, [
							E('button', { 'class': 'cbi-button cbi-button-neutral', 'data-why': r.name,
								'click': ui.createHandlerFn(this, 'handleWhy', r) }, _('Why?')), ' ',
							this.button(blocked ? 'allow' : 'block', r.name, r.client)
						])
					];
				}, this)), 'hydradns-log', _('No queries match')),
			E('div', { 'class': 'cbi-page-actions', 'style': 'text-align:left' }, [
				E('button', { 'class': 'cbi-button', 'id': 'hydradns-page-newest', 'disabled': this.before ? null : true,
					'click': ui.createHandlerFn(this, 'handlePage', 'newest') }, _('Newest')), ' ',
				E('button', { 'class': 'cbi-button', 'id': 'hydradns-page-newer', 'disabled': this.before ? null : true,
					'click': ui.createHandlerFn(this, 'handlePage', 'newer') }, _('← Newer')), ' ',
				E('span', { 'id': 'hydradns-page-rows' }, rows.length ? _('rows %d to %d').format(first, first + rows.length - 1) : ''), ' ',
				E('button', { 'class': 'cbi-button', 'id': 'hydradns-page-older', 'disabled': rows.length < PAGE ? true : null,
					'click': ui.createHandlerFn(this, 'handlePage', 'older') }, _('Older →'))
			])
		]);
	},

	handlePage: function(which) {
		if (which == 'older' && this.rows && this.rows.length) {
			this.pages.push(this.before);
			this.before = this.rows[this.rows.length - 1].id;
		}
		else if (which == 'newer') {
			this.before = this.pages.pop() || 0;
		}
		else if (which == 'newest') {
			this.pages = [];
			this.before = 0;
		}
		return this.reload();
	},

	handleWhy: function(r) {
		return api.check(r.name, r.client).then(function(out) {
			api.modal(_('Why %s is answered so for %s').format(r.name, r.client_name || r.client), [
				E('pre', { 'id': 'hydradns-why', 'style': 'white-space:pre-wrap' }, out),
				E('div', { 'class': 'right' }, E('button', { 'class': 'cbi-button', 'click': ui.hideModal }, _('Close')))
			]);
		}, function(e) {
			api.notify(null, E('p', {}, e.message), 'danger');
		});
	},

	// Allow or Block; none for a login that may only look (rpcd would
	// refuse the call, and LuCI would log it out).
	button: function(what, name, client) {
		if (!api.canWrite())
			return '';
		return E('button', {
			'class': what == 'allow' ? 'cbi-button cbi-button-positive' : 'cbi-button cbi-button-negative',
			'data-name': name,
			'click': ui.createHandlerFn(this, 'handleAsk', what, name, client)
		}, what == 'allow' ? _('Allow') : _('Block'));
	},

	// Asks for how long, and for whom: every group, or (with a device)
	// that device: always, its groups' lists; for a while, the device
	// itself (what `check --client` takes).
	handleAsk: function(what, name, client) {
		var verb = what == 'allow' ? _('Allow') : _('Block');
		var howLong = E('select', { 'class': 'cbi-input-select', 'id': 'hydradns-decide-for' }, HOW_LONG.map(function(h) {
			return E('option', { 'value': h[0] }, h[1]);
		}));
		var go = L.bind(function(forClient) {
			var duration = howLong.value || 'always';
			ui.hideModal();
			return duration == 'always' ? this.handleDecide(what, name, forClient) : this.handleTimed(what, name, forClient, duration);
		}, this);
		var device = client ? E('button', { 'class': 'cbi-button cbi-button-action', 'id': 'hydradns-decide-device',
			'click': ui.createHandlerFn(this, function() { return go(client); }) }, _('For this device\'s groups')) : '';
		// Always: the device's groups' lists; for a while: the device alone.
		howLong.addEventListener('change', function() {
			if (device)
				dom.content(device, [ howLong.value == 'always' ? _('For this device\'s groups') : _('For this device') ]);
		});
		api.modal(_('%s %s').format(verb, name), [
			E('p', {}, what == 'allow'
				? _('Allowed names are answered even when a block list has them.')
				: _('Blocked names are answered with the block answer.')),
			E('p', {}, [ E('label', {}, [ _('How long:'), ' ', howLong ]) ]),
			E('p', {}, _('Always: the name goes into the groups\' lists. For 1 hour or until tomorrow: an exception that ends by itself, for this device alone or for every group, and comes before the lists.')),
			E('div', { 'class': 'right' }, [
				E('button', { 'class': 'cbi-button', 'click': ui.hideModal }, _('Cancel')), ' ',
				device, ' ',
				E('button', { 'class': 'cbi-button cbi-button-action', 'id': 'hydradns-decide-all',
					'click': ui.createHandlerFn(this, function() { return go(''); }) }, _('For every group'))
			])
		]);
	},

	handleDecide: function(what, name, client) {
		return (what == 'allow' ? api.allow(name, client) : api.block(name, client)).then(L.bind(function(r) {
			var scope = client ? _('for the groups %s').format(r.groups || '?') : _('for every group');
			var note = E('p', { 'id': 'hydradns-decided' }, [
				(what == 'allow' ? _('%s is allowed %s; the gateway reloaded.') : _('%s is blocked %s; the gateway reloaded.')).format(name, scope), ' ',
				E('button', { 'class': 'cbi-button', 'id': 'hydradns-undo',
					'click': ui.createHandlerFn(this, 'handleUndo', name, r.undo) }, _('Undo'))
			]);
			api.notify(null, note, 'info');
		}, this), function(e) {
			api.notify(null, E('p', {}, e.message), 'danger');
		});
	},

	// An exception with an end, for device `client` or (none) every group:
	// says until when, with End now.
	handleTimed: function(what, name, client, duration) {
		var who = client ? { client: client } : {};
		return api.timed(what, who, { name: name }, duration).then(L.bind(function(list) {
			var made = list.filter(function(e) {
				return e.action == what && e.name == name && (client ? e.client == client : e.group != null);
			});
			var ends = Math.max.apply(null, made.map(function(e) { return e.ends; }).concat([ 0 ]));
			var until = ends ? api.ends(ends, this.clockState()) : '?';
			var said = client
				? (what == 'allow' ? _('%s is allowed for %s until %s.') : _('%s is blocked for %s until %s.')).format(name, client, until)
				: (what == 'allow' ? _('%s is allowed for every group until %s.') : _('%s is blocked for every group until %s.')).format(name, until);
			var note = E('p', { 'id': 'hydradns-timed' }, [
				said, ' ',
				E('button', { 'class': 'cbi-button', 'id': 'hydradns-end',
					'click': ui.createHandlerFn(this, 'handleEnd', name, made) }, _('End now'))
			]);
			api.notify(null, note, 'info');
		}, this), function(e) {
			api.notify(null, E('p', {}, e.message), 'danger');
		});
	},

	// Ends the exceptions `made` (handleTimed's) before their time.
	handleEnd: function(name, made) {
		return made.reduce(function(p, e) { return p.then(function() { return api.end(e); }); }, Promise.resolve()).then(function() {
			api.notify(null, E('p', { 'id': 'hydradns-ended' }, _('%s: the exception has ended.').format(name)), 'info');
		}, function(e) {
			api.notify(null, E('p', {}, e.message), 'danger');
		});
	},

	handleUndo: function(name, undo) {
		return api.undo(name, undo).then(function() {
			api.notify(null, E('p', { 'id': 'hydradns-undone' }, _('%s: the lists are as before; the gateway reloaded.').format(name)), 'info');
		}, function(e) {
			api.notify(null, E('p', {}, e.message), 'danger');
		});
	},

	handleSave: null,
	handleSaveApply: null,
	handleReset: null
});
