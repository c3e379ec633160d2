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

// Overview: health first, in colour; what the gateway answered over the
// last 24 hours (a chart from the query log, `stats --history`), the top
// names and clients (links into Queries), what it answered and how, its
// upstreams and lists, the pause buttons and the service's. Refreshed every
// 5 seconds from `hydradns status --json` (cheap while it runs: the counts
// come from the gateway, not from reading the lists); the chart and the
// tops, which read the log, and the exceptions in force (allowed or
// blocked for a while, `hydradns exceptions`), every minute, the
// exceptions again when one is ended. While the watchdog has failed
// DNS open, a warning that says since when and why comes first; force DNS
// and fail-open are read from UCI once, at load.

// Polls (of 5 s) between readings of the query log.
var LOG_EVERY = 12;

return view.extend({
	load: function() {
		return Promise.all([
			api.status().catch(function(e) { return { running: false, error: e.message, lists: [] }; }),
			L.resolveDefault(uci.load('hydradns')),
			this.readLog()
		]).then(function(r) { return r[0]; });
	},

	// The exceptions in force, or null where the gateway cannot say; with
	// any, the router's clock is learnt, to show their ends on it.
	readExceptions: function() {
		return L.resolveDefault(api.exceptions(), null).then(L.bind(function(list) {
			this.exceptions = list;
			return list && list.length ? api.utcOffset().then(L.bind(function(o) { this.utcOffset = o; }, this)) : null;
		}, this));
	},

	// The chart's buckets and the tops, or null each where the log cannot
	// be read (off, not written yet).
	readLog: function() {
		return Promise.all([
			this.readExceptions(),
			L.resolveDefault(api.history(), null),
			L.resolveDefault(api.top('domains', 5), null),
			L.resolveDefault(api.top('blocked', 5), null),
			L.resolveDefault(api.top('clients', 5), null)
		]).then(L.bind(function(r) {
			this.logged = { history: r[1], domains: r[2], blocked: r[3], clients: r[4] };
		}, this));
	},

	render: function(st) {
		this.box = E('div', { 'id': 'hydradns-status' });
		this.fill(st);
		var polls = 0;
		poll.add(L.bind(function() {
			var log = ++polls % LOG_EVERY == 0 ? this.readLog() : Promise.resolve();
			return log.then(L.bind(api.status, api)).then(L.bind(this.fill, this), L.bind(function(e) {
				this.fill({ running: false, error: e.message, lists: [] });
			}, this));
		}, this), 5);
		return E([], [
			E('h2', {}, _('HydraDNS')),
			E('div', { 'class': 'cbi-map-descr' },
				_('The DNS gateway in front of this network: it answers from block lists, its cache and the upstream resolvers.')),
			this.box
		]);
	},

	fill: function(st) {
		this.st = st;
		dom.content(this.box, [ api.unfiltered(st, 'hydradns-unfiltered'), this.health(st), this.refused(st) ].concat(st.running && st.stats
			? [ this.summary(st), this.chart(st), this.tops(), this.blocking(st), this.exceptionsSection(st), this.upstreams(st), this.lists(st) ]
			: [ this.stopped(st), this.chart(st), this.lists(st) ]));
	},

	// One line, in colour: green while all is well, amber for what needs a
	// look, red when nothing filters.
	health: function(st) {
		var s = st.stats, kind = 'success', key = 'running', text = _('Running: every device is filtered.');
		var down = s ? (s.upstreams || []).filter(function(u) { return u.down; }) : [];
		var failing = (st.lists || []).filter(function(l) { return l.last_error; });
		if (!st.running || !s) {
			kind = 'danger';
			key = 'stopped';
			text = _('Stopped: dnsmasq answers every device on its own, unfiltered.');
		}
		else if (st.refused) {
			kind = 'warning';
			key = 'refused';
			text = _('Running with the previous configuration: the saved one was refused (below).');
		}
		else if (s.paused_until > st.now) {
			var at = s.paused_until - st.now > 365 * 86400 ? null : api.clock(s.paused_until, st);
			kind = 'warning';
			key = 'paused';
			text = at ? _('Paused until %s: nothing is blocked.').format(at)
				: _('Paused (%s): nothing is blocked.').format(api.pauseLeft(s.paused_until, st.now));
		}
		else if (down.length) {
			kind = 'warning';
			key = 'upstream-down';
			text = _('Running, but upstream %s is down.').format(down.map(function(u) { return u.addr; }).join(', '));
		}
		else if (failing.length) {
			kind = 'warning';
			key = 'list-failing';
			text = _('Running, but list %s fails: %s').format(failing[0].name, failing[0].last_error);
		}
		return E('div', { 'class': 'alert-message ' + kind, 'id': 'hydradns-health', 'data-health': key }, E('strong', {}, text));
	},

	// Queries per 10 minutes over the last 24 hours, blocked stacked on
	// allowed: bars of plain HTML, no chart library.
	chart: function(st) {
		var buckets = (this.logged || {}).history;
		if (!buckets)
			return E('div', { 'class': 'cbi-section', 'id': 'hydradns-chart-none' }, [
				E('h3', {}, _('Last 24 hours')),
				E('p', {}, E('em', {}, _('No query log to draw from (Settings → Query log).')))
			]);
		var allowed = 0, blocked = 0, max = 1;
		buckets.forEach(function(b) {
			allowed += b.allowed;
			blocked += b.blocked;
			max = Math.max(max, b.allowed + b.blocked);
		});
		var bars = buckets.map(function(b) {
			var when = api.clock(b.start, st) || new Date(b.start * 1000).toISOString().substr(11, 5) + ' UTC';
			return E('div', { 'title': _('%s: %d allowed, %d blocked').format(when, b.allowed, b.blocked),
				'style': 'flex:1;display:flex;flex-direction:column;justify-content:flex-end;height:100%' }, [
				E('div', { 'style': 'background:#d9534f;height:%.2f%%'.format(100 * b.blocked / max) }),
				E('div', { 'style': 'background:#5cb85c;height:%.2f%%'.format(100 * b.allowed / max) })
			]);
		});
		var swatch = function(colour) {
			return E('span', { 'style': 'display:inline-block;width:.8em;height:.8em;background:' + colour }, ' ');
		};
		return E('div', { 'class': 'cbi-section' }, [
			E('h3', {}, _('Queries per 10 minutes, last 24 hours')),
			E('div', { 'id': 'hydradns-chart', 'data-allowed': allowed, 'data-blocked': blocked,
				'style': 'display:flex;align-items:flex-end;height:120px;gap:1px;border-bottom:1px solid #999' }, bars),
			E('div', { 'style': 'display:flex;justify-content:space-between;font-size:90%' }, [
				E('span', {}, _('24 hours ago')), E('span', {}, _('now')) ]),
			E('p', { 'id': 'hydradns-chart-totals' }, [
				swatch('#5cb85c'), ' ', _('allowed: %d').format(allowed), ' \u00a0 ',
				swatch('#d9534f'), ' ', _('blocked: %d').format(blocked) ])
		]);
	},

	// The most queried and most blocked names and the busiest clients of
	// the last 24 hours, each a link to the Queries page filtered on it.
	tops: function() {
		var l = this.logged || {};
		var table = function(rows, id, head, filter) {
			return rows ? api.table([ head, _('Queries') ], rows.map(function(r) {
				return [ api.queriesLink(filter(r.key), r.key), String(r.count) ];
			}), id, _('None yet')) : E('em', {}, _('The query log cannot be read.'));
		};
		// A client is shown as "name (address)" when it has a name.
		var address = function(key) { var m = /\(([^()]+)\)$/.exec(key); return m ? m[1] : key; };
		return E('div', { 'class': 'cbi-section' }, [
			E('h3', {}, _('Top of the last 24 hours')),
			E('div', { 'style': 'display:flex;flex-wrap:wrap;gap:1em' }, [
				E('div', { 'style': 'flex:1;min-width:14em' }, [ E('h4', {}, _('Queried names')),
					table(l.domains, 'hydradns-top-domains', _('Name'), function(k) { return { domain: k }; }) ]),
				E('div', { 'style': 'flex:1;min-width:14em' }, [ E('h4', {}, _('Blocked names')),
					table(l.blocked, 'hydradns-top-blocked-names', _('Name'), function(k) { return { domain: k, blocked: '1' }; }) ]),
				E('div', { 'style': 'flex:1;min-width:14em' }, [ E('h4', {}, _('Clients')),
					table(l.clients, 'hydradns-top-clients', _('Client'), function(k) { return { client: address(k) }; }) ])
			])
		]);
	},

	// Start, stop, restart, and whether it starts at boot: the init
	// script's, for logins that may write.
	serviceButtons: function(st) {
		if (!api.canWrite())
			return '';
		var b = function(id, action, label, cls, disabled) {
			return E('button', { 'class': 'cbi-button ' + cls, 'id': 'hydradns-service-' + id, 'disabled': disabled ? true : null,
				'click': ui.createHandlerFn(this, 'handleService', action) }, label);
		}.bind(this);
		return E('div', { 'class': 'cbi-page-actions', 'style': 'text-align:left' }, [
			b('start', 'start', _('Start'), 'cbi-button-positive', st.running), ' ',
			b('stop', 'stop', _('Stop'), 'cbi-button-negative', !st.running), ' ',
			b('restart', 'restart', _('Restart'), 'cbi-button-action', !st.running), ' ',
			st.boot === false
				? b('enable', 'enable', _('Start at boot'), 'cbi-button-neutral')
				: b('disable', 'disable', _('Do not start at boot'), 'cbi-button-neutral')
		]);
	},

	handleService: function(action) {
		return api.service(action).then(L.bind(this.refresh, this), function(e) {
			api.notify(null, E('p', {}, _('%s failed: %s').format(action, e.message)), 'danger');
		});
	},

	// Force DNS and fail-open as configured in `config hydradns 'main'`
	// (docs/configuration.md): a missing option is the parser's default.
	router: function() {
		var main = uci.sections('hydradns', 'hydradns')[0] || {};
		var on = function(v, dflt) { return v == null ? dflt : [ '1', 'yes', 'on', 'true', 'enabled' ].indexOf(v) >= 0; };
		var many = function(v) { return v == null ? [] : Array.isArray(v) ? v : [ v ]; };
		var zones = many(main.force_dns_zone), exempt = many(main.force_dns_exempt).length, force = _('off');
		if (on(main.force_dns, false)) {
			force = _('on (%s)').format((zones.length ? zones : [ 'lan' ]).join(', '));
			if (exempt > 0)
				force += ', ' + (exempt == 1 ? _('1 device exempt') : _('%d devices exempt').format(exempt));
		}
		return [
			api.field(_('Force DNS'), 'hydradns-force-dns', force),
			api.field(_('If HydraDNS stops answering'), 'hydradns-fail-open', on(main.fail_open, true)
				? _('dnsmasq answers on its own, unfiltered (fail open)')
				: _('the network has no DNS until it answers again'))
		];
	},

	// A config the init script's reload refused (the header's Save & Apply
	// commits without our check): the gateway runs on with the one before,
	// which the plugin reads for this page (`refused` is the plugin's).
	refused: function(st) {
		if (!st.refused)
			return null;
		return E('div', { 'class': 'alert-message warning', 'id': 'hydradns-refused' }, [
			E('strong', {}, _('The saved configuration was refused; the gateway runs with the previous one.')), ' ',
			_('hydradns check-config says:'),
			E('pre', { 'style': 'white-space:pre-wrap' }, st.refused),
			api.canWrite() ? E('button', { 'class': 'cbi-button cbi-button-negative', 'id': 'hydradns-revert',
				'click': ui.createHandlerFn(this, 'handleRevert') }, _('Revert staged changes')) : '',
			' ', _('(puts back the configuration the gateway runs with), or mend it under Settings.')
		]);
	},

	handleRevert: function() {
		return api.revert().then(L.bind(this.refresh, this), function(e) {
			api.notify(null, E('p', {}, _('Revert failed: %s').format(e.message)), 'danger');
		});
	},

	stopped: function(st) {
		return E('div', { 'class': 'cbi-section' }, [
			E('h3', {}, _('Status')),
			E('table', { 'class': 'table' }, [
				api.field(_('State'), 'hydradns-state', E('strong', {}, _('Not running'))),
				api.field(_('Why'), 'hydradns-error', st.error || '–')
			].concat(this.router())),
			E('p', {}, _('While it is stopped, dnsmasq answers every device unfiltered. "logread -e hydradns" says why it stopped.')),
			this.serviceButtons(st)
		]);
	},

	summary: function(st) {
		var s = st.stats, c = s.counters, q = s.queries, log = s.querylog || {};
		return E('div', { 'class': 'cbi-section' }, [
			E('h3', {}, _('Status')),
			E('table', { 'class': 'table' }, [
				api.field(_('State'), 'hydradns-state', E('strong', {}, st.refused
					? _('Running with the previous configuration') : _('Running'))),
				api.field(_('Version'), 'hydradns-version', s.version),
				api.field(_('Uptime'), 'hydradns-uptime', api.duration(s.uptime_s)),
				api.field(_('Queries'), 'hydradns-queries', String(q)),
				api.field(_('Blocked'), 'hydradns-blocked', '%d (%s)'.format(c.blocked, api.percent(c.blocked, q))),
				api.field(_('Answered from the cache'), 'hydradns-cached', '%d (%s)'.format(c.cached, api.percent(c.cached, q))),
				api.field(_('Forwarded upstream'), 'hydradns-forwarded', '%d (%s)'.format(c.forwarded, api.percent(c.forwarded, q))),
				api.field(_('Failed (SERVFAIL)'), 'hydradns-failed', String(c.failed))
			].concat(this.dnssec(s), [
				api.field(_('Cache'), 'hydradns-cache', _('%d of %d entries').format(s.cache_entries, s.cache_capacity)),
				api.field(_('Query log'), 'hydradns-querylog', log.enabled
					? _('on: %d written, %d dropped').format(log.written, log.dropped + (log.lost || 0))
					: _('off'))
			], this.router())),
			this.serviceButtons(st)
		]);
	},

	// Answers validated since the start, by verdict: only once DNSSEC
	// (option dnssec) has checked one, or while it waits for the clock.
	dnssec: function(s) {
		var c = s.counters, n = [ c.dnssec_secure, c.dnssec_insecure, c.dnssec_bogus, c.dnssec_indeterminate ]
			.map(function(v) { return v || 0; });
		if (!(n[0] + n[1] + n[2] + n[3]) && !s.dnssec_clock_wait)
			return [];
		var text = _('%d secure, %d insecure, %d bogus (SERVFAIL), %d undecided').format(n[0], n[1], n[2], n[3]);
		if (s.dnssec_clock_wait)
			text += ' – ' + _('signature dates are not checked until the router\'s clock is known good');
		return [ api.field(_('DNSSEC'), 'hydradns-dnssec', text) ];
	},

	blocking: function(st) {
		var s = st.stats, left = api.pauseLeft(s.paused_until, st.now);
		var groups = (s.groups || []).filter(function(g) { return g.name != 'default' || s.groups.length > 1; });
		var section = E('div', { 'class': 'cbi-section' }, [
			E('h3', {}, _('Blocking')),
			E('p', { 'id': 'hydradns-blocking' }, left
				? E('strong', {}, _('Paused, %s').format(left))
				: _('On')),
			// Read-only logins (rpcd ACL read) would be refused the call
			// and sent to the login page: no buttons for them.
			!api.canWrite() ? '' : E('div', { 'class': 'cbi-page-actions', 'style': 'text-align:left' }, [
				E('button', { 'class': 'cbi-button cbi-button-neutral', 'id': 'hydradns-pause-5m',
					'click': ui.createHandlerFn(this, 'handlePause', '5m', null) }, _('Pause 5 min')), ' ',
				E('button', { 'class': 'cbi-button cbi-button-neutral', 'id': 'hydradns-pause-1h',
					'click': ui.createHandlerFn(this, 'handlePause', '1h', null) }, _('Pause 1 hour')), ' ',
				E('button', { 'class': 'cbi-button cbi-button-neutral', 'id': 'hydradns-pause-forever',
					'click': ui.createHandlerFn(this, 'handlePause', api.FOREVER, null) }, _('Pause until resumed')), ' ',
				E('button', { 'class': 'cbi-button cbi-button-positive', 'id': 'hydradns-resume',
					'disabled': left ? null : true,
					'click': ui.createHandlerFn(this, 'handleResume', null) }, _('Resume'))
			])
		]);
		if (groups.length > 0)
			section.appendChild(api.table([ _('Group'), _('Blocked'), _('Schedule'), _('Blocking'), '' ], groups.map(L.bind(function(g) {
				if (!api.canWrite())
					return this.groupRow(g, st).concat([ '' ]);
				var gl = api.pauseLeft(g.paused_until, st.now);
				return this.groupRow(g, st).concat([
					gl
						? E('button', { 'class': 'cbi-button cbi-button-positive', 'click': ui.createHandlerFn(this, 'handleResume', g.name) }, _('Resume'))
						: E('button', { 'class': 'cbi-button cbi-button-neutral', 'click': ui.createHandlerFn(this, 'handlePause', '1h', g.name) }, _('Pause 1 hour'))
				]);
			}, this))));
		return section;
	},

	// Every exception in force, each group's and each device's, with when
	// it ends; those past their end (between two readings) are left out.
	exceptionsSection: function(st) {
		st = Object.assign({}, st, { utc_offset: st.utc_offset != null ? st.utc_offset : this.utcOffset });
		return E('div', { 'class': 'cbi-section', 'id': 'hydradns-exceptions' }, [
			E('h3', {}, _('Exceptions')),
			E('p', {}, _('Names or services allowed or blocked for a while (Queries → Allow or Block, for 1 hour or until tomorrow), before any list; each ends by itself.')),
			this.exceptions == null ? E('em', {}, _('The exceptions cannot be read.'))
				: api.exceptionTable(this.exceptions, st, L.bind(this.handleEnd, this), 'hydradns-exceptions-table', _('None now'))
		]);
	},

	handleEnd: function(e) {
		return api.end(e).then(L.bind(function(list) {
			this.exceptions = list;
			this.fill(this.st);
		}, this), function(err) {
			api.notify(null, E('p', {}, _('Cannot end the exception: %s').format(err.message)), 'danger');
		});
	},

	// A global pause stops every group's lists: the Blocking column says
	// so rather than "on" under a banner saying nothing is blocked.
	groupRow: function(g, st) {
		var state = api.groupState(g, st);
		return [ g.name, String(g.blocked), state.schedule, E('span', { 'class': 'hydradns-group-blocking' }, state.blocking) ];
	},

	upstreams: function(st) {
		return E('div', { 'class': 'cbi-section' }, [
			E('h3', {}, _('Upstream resolvers')),
			api.table([ _('Address'), _('State'), _('Answers'), _('Timeouts'), _('Errors'), _('Average reply') ],
				(st.stats.upstreams || []).map(function(u) {
					return [ u.addr, u.down ? E('strong', { 'style': 'color:#d9534f' }, _('DOWN')) : E('span', { 'style': 'color:#3c763d' }, _('up')), String(u.answers), String(u.timeouts),
						String(u.errors), u.answers > 0 ? '%.1f ms'.format(u.avg_latency_us / 1000) : '–' ];
				}))
		]);
	},

	lists: function(st) {
		return E('div', { 'class': 'cbi-section' }, [
			E('h3', {}, _('Lists')),
			api.table([ _('Name'), _('Kind'), _('Entries'), _('Last update'), _('Problem') ],
				(st.lists || []).map(function(l) {
					return [ l.name, l.kind == 'allowlist' ? _('allow') : _('block'), String(l.entries),
						l.url ? (l.last_success || _('never')) : (l.files && l.files.length ? _('local file') : _('names in the config')),
						l.last_error ? E('span', { 'style': 'color:#d9534f' }, l.last_error) : '' ];
				}))
		]);
	},

	handlePause: function(duration, group) {
		return api.pause(duration, group).then(L.bind(this.refresh, this), function(e) {
			api.notify(null, E('p', {}, _('Pause failed: %s').format(e.message)), 'danger');
		});
	},

	handleResume: function(group) {
		return api.resume(group).then(L.bind(this.refresh, this), function(e) {
			api.notify(null, E('p', {}, _('Resume failed: %s').format(e.message)), 'danger');
		});
	},

	refresh: function() {
		return this.readLog().then(L.bind(api.status, api)).then(L.bind(this.fill, this), L.bind(function(e) {
			this.fill({ running: false, error: e.message, lists: [] });
		}, this));
	},

	handleSave: null,
	handleSaveApply: null,
	handleReset: null
});
