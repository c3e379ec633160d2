'use strict';
'require view';
'require ui';
'require uci';
'require hydradns.api as api';

// LuCI's E() makes a bare string child markup; api.E makes every child
// text, as what this page shows comes from outside (api.js).
var E = api.E;

// Devices: every device the router knows of (DHCP leases, /etc/ethers, the
// neighbour tables, `config client` names) and every client of the query
// log since the router's midnight, one row per device, merged by the
// daemon (`hydradns devices --json`): name, address, MAC, groups, last
// seen, queries and blocked today. A device's name opens its page (the
// Queries page filtered to it, with its groups' state). "Add to group…"
// writes a `config client` for the device's MAC (its address when it has
// none) and applies it as Settings does: only after the daemon's
// check-config passed, and never with another page's unapplied changes.

return view.extend({
	load: function() {
		return Promise.all([
			api.devices().catch(function(e) { return e; }),
			L.resolveDefault(uci.load('hydradns')),
			api.utcOffset()
		]);
	},

	render: function(data) {
		this.utcOffset = data[2];
		return E([], [
			E('h2', {}, _('HydraDNS: devices')),
			E('div', { 'class': 'cbi-map-descr' },
				_('The devices of the DHCP leases and the neighbour tables, and those that asked since midnight. A device no rule matches is in the group "default"; "Add to group…" gives it a rule of its own (Settings → Devices).')),
			E('div', { 'class': 'cbi-section' }, this.list(data[0]))
		]);
	},

	// The device's key for the log and for a rule: its MAC, else its address.
	key: function(d) {
		return d.mac || d.ip;
	},

	// The page of device `d`: the Queries page filtered to it (by address,
	// as the log has every client's; by MAC without one).
	link: function(d) {
		var by = d.ip || d.mac;
		return E('a', { 'href': L.url('admin/services/hydradns/queries') + '?client=' + encodeURIComponent(by), 'data-device': by },
			d.name || by);
	},

	// Unix seconds as a time of day on the router's clock (every row is today's).
	when: function(t) {
		if (!t)
			return _('not today');
		var st = { utc_offset: this.utcOffset, now: Math.floor(Date.now() / 1000) };
		return api.clock(t, st) || new Date(t * 1000).toLocaleTimeString();
	},

	list: function(r) {
		if (r instanceof Error)
			return E('p', { 'class': 'alert-message warning' }, _('The devices cannot be read: %s').format(r.message));
		return api.table([ _('Name'), _('Address'), _('MAC'), _('Groups'), _('Last seen'), _('Queries today'), _('Blocked today'), '' ],
			// Busiest first (the daemon leaves them in the order it found them).
			(r.devices || []).slice().sort(function(a, b) {
				return b.queries - a.queries || b.last_seen - a.last_seen;
			}).map(L.bind(function(d) {
				return [
					this.link(d), d.ip || '–', d.mac || '–', (d.groups || []).join(', '), this.when(d.last_seen),
					String(d.queries), String(d.blocked),
					api.canWrite() ? E('button', { 'class': 'cbi-button cbi-button-action', 'data-add': this.key(d),
						'click': ui.createHandlerFn(this, 'handleAsk', d) }, _('Add to group…')) : ''
				];
			}, this)), 'hydradns-devices', _('No devices known yet'));
	},

	// The groups a device can join: default and each `config group` it is not in.
	choices: function(d) {
		return [ 'default' ].concat(uci.sections('hydradns', 'group').map(function(g) { return g['.name']; }))
			.filter(function(g) { return (d.groups || []).indexOf(g) < 0; });
	},

	handleAsk: function(d) {
		var groups = this.choices(d);
		if (!groups.length) {
			api.notify(null, E('p', {}, _('%s is in every group already.').format(d.name || this.key(d))), 'info');
			return;
		}
		var select = E('select', { 'class': 'cbi-input-select', 'id': 'hydradns-add-group' },
			groups.map(function(g) { return E('option', { 'value': g }, g); }));
		api.modal(_('Add %s to a group').format(d.name || this.key(d)), [
			E('p', {}, _('Its groups now: %s. A rule for its %s %s is written, in these groups and the one chosen; its lists apply to it at once.')
				.format((d.groups || []).join(', '), d.mac ? _('MAC') : _('address'), this.key(d))),
			select,
			E('div', { 'class': 'right' }, [
				E('button', { 'class': 'cbi-button', 'click': ui.hideModal }, _('Cancel')), ' ',
				E('button', { 'class': 'cbi-button cbi-button-positive', 'id': 'hydradns-add-group-ok',
					'click': ui.createHandlerFn(this, function() {
						ui.hideModal();
						return this.handleAdd(d, select.value);
					}) }, _('Add'))
			])
		]);
	},

	// The rule of device `d` joins `group`: the `config client` that
	// matches its key exactly, else a new one (the daemon takes the first
	// rule for a MAC or address, so a second one would be ignored). Staged
	// here, checked by the daemon, applied only if it passes.
	handleAdd: function(d, group) {
		var key = this.key(d), groups = (d.groups || []).concat([ group ]);
		return uci.changes().then(L.bind(function(changes) {
			var others = api.foreign((changes || {}).hydradns, api.DEVICES);
			if (others.length) {
				api.notify(_('Not applied: another page has unapplied changes'), E('p', { 'id': 'hydradns-foreign' },
					_('The %s page has changes that are saved but not applied (%s). Apply them there (they are checked then) or revert them with the header\'s Unsaved Changes → Revert; then add the device.')
						.format(api.otherPage(api.DEVICES), others.join(', '))), 'warning');
				return false;
			}
			var own = uci.sections('hydradns', 'client').filter(function(s) {
				return L.toArray(s.match).some(function(m) { return m.toLowerCase() == key.toLowerCase(); });
			})[0];
			var sid = own ? own['.name'] : uci.add('hydradns', 'client');
			if (!own) {
				uci.set('hydradns', sid, 'name', d.name || key);
				uci.set('hydradns', sid, 'match', [ key ]);
			}
			uci.set('hydradns', sid, 'group', groups);
			var c = api.configText(uci.sections('hydradns'));
			return api.checkConfig(c.text).then(L.bind(function(r) {
				if (r.valid)
					return uci.save().then(function() {
						ui.changes.apply(true);
						return true;
					});
				// Nothing of it stays staged: dropped here, before any save.
				uci.unload('hydradns');
				return uci.load('hydradns').then(L.bind(function() {
					api.notify(_('HydraDNS refuses this configuration'), api.explain(r.output, c), 'danger');
					return false;
				}, this));
			}, this));
		}, this)).catch(function(e) {
			api.notify(null, E('p', {}, _('Cannot add the device: %s').format(e.message)), 'danger');
			return false;
		});
	},

	handleSave: null,
	handleSaveApply: null,
	handleReset: null
});
