'use strict';
'require view';
'require form';
'require uci';
'require hydradns.api as api';

// Settings: the main options, the query log, devices (client rules),
// groups, schedules and local names. The daemon's own check-config reads
// the staged config before Save & Apply applies it. Flags and choices keep
// their option written (rmempty false) and their defaults are the daemon's:
// LuCI would otherwise delete an option equal to the form's default, and
// the shipped config's dnsmasq_mode 'upstream' is not the daemon's default.

var DAYS = [ 'sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat' ];

function blockModes(o) {
	o.value('null', _('0.0.0.0 and :: (null)'));
	o.value('nxdomain', _('NXDOMAIN'));
	o.value('refused', _('REFUSED'));
}

return view.extend({
	load: function() {
		return uci.load('hydradns');
	},

	render: function() {
		var m = new form.Map('hydradns', _('HydraDNS: settings'),
			_('Every option is described in docs/configuration.md. Save & Apply checks the whole configuration with "hydradns check-config" first; a reload keeps the cache.'));
		var s, o;

		s = m.section(form.TypedSection, 'hydradns', _('Gateway'));
		s.anonymous = true;
		s.addremove = false;
		s.tab('general', _('General'));
		s.tab('blocking', _('Blocking'));
		s.tab('access', _('Access'));
		s.tab('upstream', _('Upstream and cache'));
		s.tab('monitoring', _('Monitoring'));

		o = s.taboption('general', form.Flag, 'enabled', _('Enabled'));
		o.rmempty = false;
		o.default = '1';
		o = s.taboption('general', form.ListValue, 'dnsmasq_mode', _('With dnsmasq'),
			_('upstream: dnsmasq keeps port 53 and forwards to HydraDNS; replace: HydraDNS takes port 53 and dnsmasq answers local names; off: leave dnsmasq alone'));
		o.rmempty = false;
		o.value('upstream');
		o.value('replace');
		o.value('off');
		o.default = 'off';
		o = s.taboption('general', form.DynamicList, 'listen', _('Listen on'));
		o.datatype = 'string';
		o.placeholder = '127.0.0.1:5353';

		o = s.taboption('blocking', form.ListValue, 'block_mode', _('Answer for a blocked name'));
		o.rmempty = false;
		blockModes(o);
		o.default = 'null';
		o = s.taboption('blocking', form.Value, 'block_ttl', _('TTL of block answers (s)'));
		o.datatype = 'uinteger';
		o.placeholder = '60';
		o = s.taboption('blocking', form.Flag, 'cname_inspection', _('Block CNAME cloaking'));
		o.rmempty = false;
		o.default = '1';
		o = s.taboption('blocking', form.Flag, 'rebind_protection', _('Rebind protection'));
		o.rmempty = false;
		o.default = '1';
		o = s.taboption('blocking', form.DynamicList, 'rebind_allow', _('Domains that may answer private addresses'));
		o = s.taboption('blocking', form.Value, 'refresh_interval', _('List refresh interval'));
		o.placeholder = '6h';

		o = s.taboption('access', form.DynamicList, 'allow_client', _('Clients allowed'), _('addresses or networks; none: the private ranges'));
		o = s.taboption('access', form.ListValue, 'deny_action', _('Other clients get'));
		o.rmempty = false;
		o.value('refuse', _('REFUSED'));
		o.value('drop', _('no answer'));
		o = s.taboption('access', form.Value, 'ratelimit', _('Queries per second per client'), _('0: no limit'));
		o.datatype = 'uinteger';
		o.placeholder = '0';

		o = s.taboption('upstream', form.DynamicList, 'upstream', _('Upstream resolvers'),
			_('IP[:PORT], tls://NAME[:PORT][#IP] for DNS over TLS or https://NAME[:PORT]/PATH[#IP] for DNS over HTTPS (the certificate must carry NAME); none: the WAN\'s, from the resolv file'));
		o.placeholder = 'tls://dns.quad9.net#9.9.9.9';
		o = s.taboption('upstream', form.DynamicList, 'fallback', _('Fallback resolvers'),
			_('plain IP[:PORT], asked only when every upstream failed; none: nothing is ever sent in clear'));
		o = s.taboption('upstream', form.DynamicList, 'bootstrap', _('Bootstrap resolvers'),
			_('plain IP[:PORT] that find the addresses of tls:// and https:// names; none: the WAN\'s'));
		o = s.taboption('upstream', form.ListValue, 'upstream_strategy', _('Strategy'));
		o.rmempty = false;
		o.value('failover');
		o.value('random');
		o.value('parallel');
		o.default = 'failover';
		o = s.taboption('upstream', form.Value, 'upstream_timeout', _('Upstream timeout'));
		o.placeholder = '2s';
		o = s.taboption('upstream', form.Value, 'cache_size', _('Cache entries'));
		o.datatype = 'uinteger';
		o.placeholder = '4096';
		o = s.taboption('upstream', form.Flag, 'serve_stale', _('Serve expired answers while the upstream fails'));
		o.rmempty = false;
		o.default = '1';
		o = s.taboption('upstream', form.Flag, 'prefetch', _('Refresh names in use before they expire'));
		o.rmempty = false;
		o.default = '1';

		o = s.taboption('monitoring', form.Value, 'metrics_listen', _('Prometheus metrics at'),
			_('an address and port for GET /metrics, e.g. 127.0.0.1:9153; empty: off'));
		o.placeholder = '127.0.0.1:9153';
		o = s.taboption('monitoring', form.Value, 'metrics_textfile', _('Metrics file for node-exporter'),
			_('e.g. /var/prometheus/hydradns.prom; empty: off'));
		o = s.taboption('monitoring', form.Value, 'stats_interval', _('Summary to the system log every'));
		o.placeholder = '1h';

		s = m.section(form.TypedSection, 'querylog', _('Query log'));
		s.anonymous = true;
		s.addremove = true;
		o = s.option(form.Flag, 'enabled', _('Enabled'));
		o.rmempty = false;
		o.default = '1';
		o = s.option(form.Value, 'retention', _('Keep for'));
		o.placeholder = '7d';
		o = s.option(form.Value, 'max_size', _('At most'));
		o.placeholder = '32M';
		o = s.option(form.Flag, 'anonymize_clients', _('Store clients as /24 or /48 only'));
		o.rmempty = false;

		s = m.section(form.GridSection, 'client', _('Devices'),
			_('Which devices are in which groups. A device no rule matches is in the group "default".'));
		s.anonymous = true;
		s.addremove = true;
		s.nodescriptions = true;
		o = s.option(form.Value, 'name', _('Name'));
		o = s.option(form.DynamicList, 'match', _('Match'), _('address, network, MAC or a hostname glob from the DHCP leases'));
		o.rmempty = false;
		o = s.option(form.MultiValue, 'group', _('Groups'));
		o.value('default');
		uci.sections('hydradns', 'group').forEach(function(g) { o.value(g['.name']); });

		s = m.section(form.TypedSection, 'group', _('Groups'),
			_('A group\'s lists are chosen on the Lists page; here, when they apply and how blocked names are answered.'));
		s.addremove = true;
		s.anonymous = false;
		o = s.option(form.ListValue, 'schedule', _('Schedule'));
		o.rmempty = false;
		o.value('', _('always'));
		uci.sections('hydradns', 'schedule').forEach(function(t) { o.value(t['.name']); });
		o = s.option(form.ListValue, 'block_mode', _('Answer for a blocked name'));
		o.rmempty = false;
		o.value('', _('as the gateway'));
		blockModes(o);

		s = m.section(form.TypedSection, 'schedule', _('Schedules'));
		s.addremove = true;
		s.anonymous = false;
		o = s.option(form.MultiValue, 'day', _('Days'), _('none: every day'));
		DAYS.forEach(function(d) { o.value(d); });
		o = s.option(form.Value, 'start', _('From'));
		o.placeholder = '21:00';
		o.validate = function(id, v) { return !v || /^\d{1,2}:\d{2}$/.test(v) ? true : _('HH:MM'); };
		o = s.option(form.Value, 'end', _('Until'), _('at or before the start: the next day'));
		o.placeholder = '07:00';
		o.validate = function(id, v) { return !v || /^\d{1,2}:\d{2}$/.test(v) ? true : _('HH:MM'); };

		s = m.section(form.GridSection, 'record', _('Local names'),
			_('Names answered by the gateway itself, before any list.'));
		s.anonymous = true;
		s.addremove = true;
		s.nodescriptions = true;
		o = s.option(form.Value, 'name', _('Name'), _('or *.name for every name under it'));
		o.rmempty = false;
		o = s.option(form.DynamicList, 'ip', _('Addresses'));
		o = s.option(form.Value, 'cname', _('Alias of'));
		o = s.option(form.Value, 'ttl', _('TTL (s)'));
		o.datatype = 'uinteger';
		o.placeholder = '300';

		return m.render();
	},

	handleSaveApply: function(ev, mode) {
		return api.saveApply(this, ev, mode);
	}
});
