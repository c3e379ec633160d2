'use strict';
'require view';
'require dom';
'require ui';
'require hydradns.api as api';

// Queries: the top blocked names and the busiest clients of the last day,
// and the last 100 queries (filtered by name, client or outcome), each with
// a button that allows or blocks its name for every group. Read from the
// query log (`hydradns log --json`, `top --json`).

return view.extend({
	filter: { domain: '', client: '', blocked: false },

	load: function() {
		// The Overview's links arrive with ?domain=…&client=…&blocked=1.
		var q = new URLSearchParams((window.location && window.location.search) || '');
		this.filter = { domain: q.get('domain') || '', client: q.get('client') || '', blocked: q.get('blocked') == '1' };
		var f = this.filter;
		return Promise.all([
			api.top('blocked', 10).catch(function(e) { return e; }),
			api.top('clients', 10).catch(function(e) { return e; }),
			api.log(100, f.domain, f.client, f.blocked).catch(function(e) { return e; })
		]);
	},

	render: function(data) {
		this.recent = E('div', { 'id': 'hydradns-recent' });
		this.fillRecent(data[2]);
		return E([], [
			E('h2', {}, _('HydraDNS: queries')),
			E('div', { 'class': 'cbi-section' }, [
				E('h3', {}, _('Top blocked names, last 24 hours')),
				this.topBlocked(data[0])
			]),
			E('div', { 'class': 'cbi-section' }, [
				E('h3', {}, _('Top clients, last 24 hours')),
				this.topClients(data[1])
			]),
			E('div', { 'class': 'cbi-section' }, [
				E('h3', {}, _('Last 100 queries')),
				this.filterBar(),
				this.recent
			])
		]);
	},

	failed: function(e) {
		return E('p', { 'class': 'alert-message warning' }, _('The query log cannot be read: %s').format(e.message));
	},

	topBlocked: function(rows) {
		if (rows instanceof Error)
			return this.failed(rows);
		return api.table([ _('Name'), _('Times blocked'), '' ], rows.map(L.bind(function(r) {
			return [ r.key, String(r.count), this.button('allow', r.key) ];
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
		var client = E('input', { 'type': 'text', 'class': 'cbi-input-text', 'id': 'hydradns-filter-client',
			'placeholder': _('client: address, MAC or name'), 'value': f.client });
		var blocked = E('input', { 'type': 'checkbox', 'id': 'hydradns-filter-blocked', 'checked': f.blocked ? true : null });
		return E('div', { 'class': 'cbi-section-actions', 'style': 'margin-bottom:1em' }, [
			domain, ' ', client, ' ', E('label', {}, [ blocked, ' ', _('blocked only') ]), ' ',
			E('button', { 'class': 'cbi-button cbi-button-action', 'id': 'hydradns-filter-apply',
				'click': ui.createHandlerFn(this, function() {
					this.filter = { domain: domain.value.trim(), client: client.value.trim(), blocked: blocked.checked };
					return this.reload();
				}) }, _('Filter'))
		]);
	},

	reload: function() {
		var f = this.filter;
		return api.log(100, f.domain, f.client, f.blocked).then(L.bind(this.fillRecent, this), L.bind(this.fillRecent, this));
	},

	fillRecent: function(rows) {
		if (rows instanceof Error)
			return dom.content(this.recent, this.failed(rows));
		dom.content(this.recent, api.table([ _('Time'), _('Client'), _('Name'), _('Type'), _('Answer'), _('Took'), '' ],
			rows.map(L.bind(function(r) {
				var blocked = r.outcome == 'blocked';
				return [
					new Date(r.unix_ms).toLocaleTimeString(),
					r.client_name ? E('span', { 'title': r.client }, r.client_name) : r.client,
					r.name, r.type,
					r.list ? '%s (%s)'.format(r.outcome, r.list) : '%s, %s'.format(r.outcome, r.rcode),
					r.latency_us >= 1000 ? '%.1f ms'.format(r.latency_us / 1000) : '%d µs'.format(r.latency_us),
					this.button(blocked ? 'allow' : 'block', r.name)
				];
			}, this)), 'hydradns-log', _('No queries match')));
	},

	button: function(what, name) {
		// Read-only logins would be refused the call and logged out.
		if (!api.canWrite())
			return '';
		return E('button', {
			'class': what == 'allow' ? 'cbi-button cbi-button-positive' : 'cbi-button cbi-button-negative',
			'data-name': name,
			'click': ui.createHandlerFn(this, 'handleDecide', what, name)
		}, what == 'allow' ? _('Allow') : _('Block'));
	},

	handleDecide: function(what, name) {
		return (what == 'allow' ? api.allow(name) : api.block(name)).then(function() {
			ui.addNotification(null, E('p', {}, (what == 'allow'
				? _('%s is allowed for every group (list luci_allow); the gateway reloaded.')
				: _('%s is blocked for every group (list luci_block); the gateway reloaded.')).format(name)), 'info');
		}, function(e) {
			ui.addNotification(null, E('p', {}, e.message), 'danger');
		});
	},

	handleSave: null,
	handleSaveApply: null,
	handleReset: null
});
