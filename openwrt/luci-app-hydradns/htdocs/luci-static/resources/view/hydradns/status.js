'use strict';
'require view';
'require dom';
'require poll';
'require ui';
'require uci';
'require hydradns.api as api';

// Overview: is the gateway running, what it answered and how, its
// upstreams and lists, and the pause buttons. Refreshed every 5 seconds
// from `hydradns status --json` (cheap while it runs: the counts come from
// the gateway, not from reading the lists). Above them, while the watchdog
// has failed DNS open, a warning that says since when and why; force DNS
// and fail-open are read from UCI once, at load.

return view.extend({
	load: function() {
		return Promise.all([
			api.status().catch(function(e) { return { running: false, error: e.message, lists: [] }; }),
			L.resolveDefault(uci.load('hydradns'))
		]).then(function(r) { return r[0]; });
	},

	render: function(st) {
		this.box = E('div', { 'id': 'hydradns-status' });
		this.fill(st);
		poll.add(L.bind(function() {
			return api.status().then(L.bind(this.fill, this), L.bind(function(e) {
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
		dom.content(this.box, [ api.unfiltered(st, 'hydradns-unfiltered'), this.refused(st) ].concat(st.running && st.stats
			? [ this.summary(st), this.blocking(st), this.upstreams(st), this.lists(st) ]
			: [ this.stopped(st), this.lists(st) ]));
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
			ui.addNotification(null, E('p', {}, _('Revert failed: %s').format(e.message)), 'danger');
		});
	},

	stopped: function(st) {
		return E('div', { 'class': 'cbi-section' }, [
			E('h3', {}, _('Status')),
			E('table', { 'class': 'table' }, [
				api.field(_('State'), 'hydradns-state', E('strong', {}, _('Not running'))),
				api.field(_('Why'), 'hydradns-error', st.error || '–')
			].concat(this.router())),
			E('p', {}, _('Start it with "/etc/init.d/hydradns start", or under System → Startup; "logread -e hydradns" says why it stopped.'))
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
				api.field(_('Failed (SERVFAIL)'), 'hydradns-failed', String(c.failed)),
				api.field(_('Cache'), 'hydradns-cache', _('%d of %d entries').format(s.cache_entries, s.cache_capacity)),
				api.field(_('Query log'), 'hydradns-querylog', log.enabled
					? _('on: %d written, %d dropped').format(log.written, log.dropped + (log.lost || 0))
					: _('off'))
			].concat(this.router()))
		]);
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

	groupRow: function(g, st) {
		var gl = api.pauseLeft(g.paused_until, st.now);
		return [
			g.name, String(g.blocked),
			g.schedule ? '%s (%s)'.format(g.schedule, g.active ? _('active') : _('inactive')) : _('always'),
			gl ? _('paused, %s').format(gl) : _('on')
		];
	},

	upstreams: function(st) {
		return E('div', { 'class': 'cbi-section' }, [
			E('h3', {}, _('Upstream resolvers')),
			api.table([ _('Address'), _('State'), _('Answers'), _('Timeouts'), _('Errors'), _('Average reply') ],
				(st.stats.upstreams || []).map(function(u) {
					return [ u.addr, u.down ? E('strong', {}, _('DOWN')) : _('up'), String(u.answers), String(u.timeouts),
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
						l.last_error || '' ];
				}))
		]);
	},

	handlePause: function(duration, group) {
		return api.pause(duration, group).then(L.bind(this.refresh, this), function(e) {
			ui.addNotification(null, E('p', {}, _('Pause failed: %s').format(e.message)), 'danger');
		});
	},

	handleResume: function(group) {
		return api.resume(group).then(L.bind(this.refresh, this), function(e) {
			ui.addNotification(null, E('p', {}, _('Resume failed: %s').format(e.message)), 'danger');
		});
	},

	refresh: function() {
		return api.status().then(L.bind(this.fill, this));
	},

	handleSave: null,
	handleSaveApply: null,
	handleReset: null
});
