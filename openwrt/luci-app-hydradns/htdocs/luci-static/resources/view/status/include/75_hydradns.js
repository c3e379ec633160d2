'use strict';
'require baseclass';
'require hydradns.api as api';

// LuCI's E() makes a bare string child markup; api.E makes every child
// text, as what this page shows comes from outside (api.js).
var E = api.E;

// A HydraDNS box on LuCI's Status → Overview, beside System and Memory:
// the figures a router owner glances at, polled with the rest of that page,
// and a link to the HydraDNS pages. While the watchdog has failed DNS open,
// the warning comes first, whether the daemon runs or not.

return baseclass.extend({
	title: _('HydraDNS'),

	load: function() {
		return api.status().catch(function(e) { return { running: false, error: e.message }; });
	},

	render: function(st) {
		var fields;
		if (st.running && st.stats) {
			var s = st.stats, c = s.counters, left = api.pauseLeft(s.paused_until, st.now);
			var ups = s.upstreams || [];
			fields = [
				[ 'queries', _('Queries'), String(s.queries) ],
				[ 'blocked', _('Blocked'), '%d (%s)'.format(c.blocked, api.percent(c.blocked, s.queries)) ],
				[ 'cached', _('Answered from the cache'), '%d (%s)'.format(c.cached, api.percent(c.cached, s.queries)) ],
				[ 'blocking', _('Blocking'), left ? _('Paused, %s').format(left) : _('On') ],
				[ 'upstreams', _('Upstream resolvers'), _('%d of %d up').format(ups.filter(function(u) { return !u.down; }).length, ups.length) ]
			];
		}
		else {
			fields = [
				[ 'state', _('State'), _('Not running') ],
				[ 'error', _('Why'), st.error || '–' ]
			];
		}
		return E('div', {}, [
			api.unfiltered(st, 'hydradns-overview-unfiltered'),
			E('table', { 'class': 'table' }, fields.map(function(f) {
				return api.field(f[1], 'hydradns-overview-' + f[0], f[2]);
			})),
			E('p', {}, E('a', { 'href': L.url('admin/services/hydradns') }, _('More on the HydraDNS pages')))
		]);
	}
});
