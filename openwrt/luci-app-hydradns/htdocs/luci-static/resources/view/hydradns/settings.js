'use strict';
'require view';
'require form';
'require uci';
'require ui';
'require dom';
'require network';
'require tools.widgets as widgets';
'require hydradns.api as api';

// LuCI's E() makes a bare string child markup; api.E makes every child
// text, as what this page shows comes from outside (api.js).
var E = api.E;

// Settings: the main options, the query log, devices (client rules),
// groups (with their own upstreams and the exceptions now in force),
// schedules and local names. The daemon's own check-config reads
// the staged config before Save & Apply applies it. Flags and choices keep
// their option written (rmempty false) and their defaults are the daemon's:
// LuCI would otherwise delete an option equal to the form's default, and
// the shipped config's dnsmasq_mode 'upstream' is not the daemon's default.
// Lists whose absence means a default (force DNS's ports and zones) show
// that default and are written only when changed: an untouched form leaves
// the file as it was.

var DAYS = [ 'sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat' ];

// What the daemon's parser takes (src/config/router.rs), checked here so a
// typo is caught in the browser, before check-config: a port from 1 to
// 65535 (several, space-separated, in one entry), and an IPv4 or IPv6
// address, optionally /prefix, or a MAC address.
function ports(v) {
	var words = String(v).trim().split(/\s+/);
	return words.every(function(w) { return /^\d{1,5}$/.test(w) && +w >= 1 && +w <= 65535; })
		? true : _('a port from 1 to 65535');
}

function ipv4(a) {
	return /^((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$/.test(a);
}

function ipv6(a) {
	var halves = a.split('::');
	if (halves.length > 2)
		return false;
	var groups = 0, ok = halves.every(function(h, i) {
		if (h == '')
			return true;
		var parts = h.split(':');
		return parts.every(function(p, j) {
			// The last 32 bits may be written as IPv4 (::ffff:192.0.2.1).
			if (i == halves.length - 1 && j == parts.length - 1 && ipv4(p)) {
				groups += 2;
				return true;
			}
			groups++;
			return /^[0-9a-fA-F]{1,4}$/.test(p);
		});
	});
	return ok && (halves.length == 2 ? groups <= 7 : groups == 8);
}

function exempt(v) {
	v = String(v).trim();
	if (/^[0-9a-fA-F]{2}([:-][0-9a-fA-F]{2}){5}$/.test(v))
		return true;
	var m = /^([^/]+)(?:\/(\d{1,3}))?$/.exec(v);
	if (m && ipv4(m[1]) && (m[2] == null || +m[2] <= 32))
		return true;
	if (m && ipv6(m[1]) && (m[2] == null || +m[2] <= 128))
		return true;
	return _('an IPv4 or IPv6 address, a network (CIDR such as 192.168.1.0/28) or a MAC address');
}

// An upstream's shape as the parser takes it (src/config/upstream.rs):
// IP[:PORT] ([IPv6]:PORT), tls://NAME[:PORT][#IP,…] or
// https://NAME[:PORT][/PATH][#IP,…]. Only the shape: check-config judges
// the rest on Save & Apply.
function upstream(v) {
	v = String(v).trim();
	var bad = _('IP[:PORT], tls://NAME[:PORT][#IP,…] or https://NAME[:PORT][/PATH][#IP,…]');
	var bare = function(a) { return a.replace(/^\[(.*)\]$/, '$1'); };
	var m = /^(tls|https):\/\/([^\/#\s]+)([^#\s]*)(?:#(\S+))?$/.exec(v);
	if (m) {
		var host = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.-]+)(?::(\d{1,5}))?$/.exec(m[2]);
		if (!host && !ipv6(m[2]))
			return bad;
		if (host && (host[1].charAt(0) == '[' ? !ipv6(bare(host[1])) : /^\.|\.\.|^-/.test(host[1])))
			return bad;
		if (host && host[2] != null && !(+host[2] >= 1 && +host[2] <= 65535))
			return bad;
		if (m[1] == 'tls' && m[3])
			return bad;
		if (m[4] != null && !m[4].split(',').every(function(a) { a = bare(a.trim()); return ipv4(a) || ipv6(a); }))
			return bad;
		return true;
	}
	var p = /^(.*?)(?::(\d{1,5}))?$/.exec(v);
	if (ipv4(v) || ipv6(v) || ipv6(bare(v)) && /^\[/.test(v))
		return true;
	if (p[2] != null && +p[2] >= 1 && +p[2] <= 65535 && (ipv4(p[1]) || /^\[.*\]$/.test(p[1]) && ipv6(bare(p[1]))))
		return true;
	return bad;
}

// Family resolvers, with the addresses and host names their operators
// publish, as plain DNS and as DNS over TLS and over HTTPS in the upstream
// syntax (docs/configuration.md). Addresses after '#' are the operator's
// for that host name: no bootstrap lookup before the first query, and
// nothing on the way to misdirect it. IPv4 only: an IPv6 upstream on a
// router without IPv6 fails its first tries before it is skipped (each
// source has the IPv6 ones).
var PRESETS = [
	// Cloudflare, 1.1.1.1 for Families, "Adult Content + Malware": the
	// addresses, DoH endpoint and DoT host name in one row of
	// https://developers.cloudflare.com/1.1.1.1/infrastructure/network-operators/
	// (cloudflare/cloudflare-docs, src/content/docs/1.1.1.1/infrastructure/network-operators.mdx;
	// the addresses also in .../1.1.1.1/ip-addresses.mdx, "Block malware and adult content").
	{ id: 'cloudflare-family', label: _('Cloudflare for Families (adult content and malware): plain DNS'),
		upstream: [ '1.1.1.3', '1.0.0.3' ] },
	{ id: 'cloudflare-family-tls', label: _('Cloudflare for Families (adult content and malware): DNS over TLS'),
		upstream: [ 'tls://family.cloudflare-dns.com#1.1.1.3,1.0.0.3' ] },
	{ id: 'cloudflare-family-https', label: _('Cloudflare for Families (adult content and malware): DNS over HTTPS'),
		upstream: [ 'https://family.cloudflare-dns.com/dns-query#1.1.1.3,1.0.0.3' ] },
	// AdGuard DNS, "Family Protection" (blocks adult websites, enforces
	// safe search): addresses, DoT and DoH in one table of AdGuard's
	// knowledge base, https://adguard-dns.io/kb/general/dns-providers/
	// (AdguardTeam/KnowledgeBaseDNS, docs/general/dns-providers.md).
	{ id: 'adguard-family', label: _('AdGuard DNS Family Protection: plain DNS'),
		upstream: [ '94.140.14.15', '94.140.15.16' ] },
	{ id: 'adguard-family-tls', label: _('AdGuard DNS Family Protection: DNS over TLS'),
		upstream: [ 'tls://family.adguard-dns.com#94.140.14.15,94.140.15.16' ] },
	{ id: 'adguard-family-https', label: _('AdGuard DNS Family Protection: DNS over HTTPS'),
		upstream: [ 'https://family.adguard-dns.com/dns-query#94.140.14.15,94.140.15.16' ] },
	// CleanBrowsing, "Family Filter": the addresses (and DoT on 853, DoH
	// on 443) from CleanBrowsing's
	// https://cleanbrowsing.org/support/troubleshooting/firewall-dns-requirements;
	// the DoT host name and DoH URL as AdGuard's knowledge base (above)
	// lists them for https://cleanbrowsing.org/filters/. Not pinned: no
	// source of CleanBrowsing's says which addresses serve those names,
	// so the bootstrap resolvers look them up.
	{ id: 'cleanbrowsing-family', label: _('CleanBrowsing Family Filter: plain DNS'),
		upstream: [ '185.228.168.168', '185.228.169.168' ] },
	{ id: 'cleanbrowsing-family-tls', label: _('CleanBrowsing Family Filter: DNS over TLS'),
		upstream: [ 'tls://family-filter-dns.cleanbrowsing.org' ] },
	{ id: 'cleanbrowsing-family-https', label: _('CleanBrowsing Family Filter: DNS over HTTPS'),
		upstream: [ 'https://doh.cleanbrowsing.org/doh/family-filter/' ] }
];

// A group's upstream presets: a choice and a button that puts the
// preset's upstreams in the group's Upstreams list (replacing what it
// held: a preset is a whole set). Nothing of its own is saved.
var UpstreamPresets = form.DummyValue.extend({
	__name__: 'CBI.HydraDNSUpstreamPresets',

	renderWidget: function(section_id) {
		// As wide as its longest choice: each names its operator and its transport.
		var select = E('select', { 'class': 'cbi-input-select', 'id': 'hydradns-preset-' + section_id, 'style': 'width:auto;max-width:100%' },
			[ E('option', { 'value': '' }, _('A family resolver…')) ].concat(PRESETS.map(function(p) {
				return E('option', { 'value': p.id, 'title': p.upstream.join(' ') }, p.label);
			})));
		return E('div', {}, [ select, ' ',
			E('button', { 'class': 'cbi-button cbi-button-action', 'type': 'button', 'data-preset-for': section_id,
				'click': ui.createHandlerFn(this, 'handleUse', section_id, select) }, _('Use as the upstreams')) ]);
	},

	handleUse: function(section_id, select) {
		var p = PRESETS.filter(function(x) { return x.id == select.value; })[0];
		var list = this.section.getUIElement(section_id, 'upstream');
		if (p && list)
			list.setValue(p.upstream.slice());
	}
});

// The exceptions in force for a group (`hydradns exceptions`), with their
// ends and an End button each. Nothing of its own is saved.
var GroupExceptions = form.DummyValue.extend({
	__name__: 'CBI.HydraDNSExceptions',

	renderWidget: function(section_id) {
		var box = E('div', { 'id': 'hydradns-exceptions-' + section_id });
		this.fill(box, section_id);
		return box;
	},

	fill: function(box, section_id) {
		if (this.list == null)
			return dom.content(box, E('em', {}, _('The exceptions cannot be read (is HydraDNS running?).')));
		var st = { utc_offset: this.utcOffset, now: Math.floor(Date.now() / 1000) };
		dom.content(box, api.exceptionTable(this.list.filter(function(e) { return e.group == section_id; }), st,
			L.bind(function(e) {
				return api.end(e).then(L.bind(function(list) {
					this.list = list;
					this.fill(box, section_id);
				}, this), function(err) {
					api.notify(null, E('p', {}, _('Cannot end the exception: %s').format(err.message)), 'danger');
				});
			}, this), null, _('None now')));
	}
});

// A list option of `config hydradns 'main'` whose absence means `dflt`:
// shown as such, and (its form value equal to this) not written unless
// changed.
function listDefault(o, name, dflt) {
	o.cfgvalue = function(section_id) {
		var v = uci.get('hydradns', section_id, name);
		return v != null ? v : dflt.slice();
	};
}

// Choices made of the config's sections (groups, schedules), made again
// each time the form loads: a section just added on this page (LuCI saves
// the form and loads it again) is offered at once, not after a reload.
function choices(o, fill) {
	var load = o.load;
	o.load = function() {
		this.keylist = [];
		this.vallist = [];
		fill(this);
		return load.apply(this, arguments);
	};
	fill(o);
}

function blockModes(o) {
	o.value('null', _('the address 0.0.0.0 or :: (null)'));
	o.value('nxdomain', _('"no such name" (NXDOMAIN)'));
	o.value('refused', _('"refused" (REFUSED)'));
}

// A group's services: the catalogue as checkboxes, one box per category,
// with a filter box over names, ids and domains. Ids the catalogue lacks
// (a services_url not yet downloaded) stay listed, and checked.
var ServiceToggles = form.MultiValue.extend({
	__name__: 'CBI.HydraDNSServices',

	renderWidget: function(section_id, option_index, cfgvalue) {
		// Keyed by names from the catalogue: a Map, where a category named
		// __proto__ or constructor is a category like any other.
		var on = L.toArray(cfgvalue), known = new Map(), byCategory = new Map(), boxes = [], labels = [];
		var file = function(category, sv) {
			if (!byCategory.has(category))
				byCategory.set(category, []);
			byCategory.get(category).push(sv);
		};
		this.catalogue.forEach(function(sv) {
			known.set(sv.id, true);
			file(sv.category || 'other', sv);
		});
		on.filter(function(id) { return !known.has(id); }).forEach(function(id) {
			file(_('not in the catalogue'), { id: id, name: id, domains: [] });
		});
		var fieldsets = Array.from(byCategory.keys()).sort().map(function(category) {
			var own = [];
			var f = E('fieldset', { 'class': 'cbi-section' }, [ E('legend', {}, category) ].concat(byCategory.get(category).map(function(sv) {
				var domains = (sv.domains || []).join(' '), name = sv.name || sv.id;
				var box = E('input', { 'type': 'checkbox', 'value': sv.id, 'checked': on.indexOf(sv.id) >= 0 ? '' : null });
				var label = E('label', { 'title': domains, 'style': 'display:inline-block;margin-right:1em' },
					[ box, ' ', name ]);
				label.search = (sv.id + ' ' + name + ' ' + domains).toLowerCase();
				boxes.push(box);
				labels.push(label);
				own.push(label);
				return label;
			})));
			f.labels = own;
			return f;
		});
		var filter = E('input', { 'type': 'text', 'class': 'cbi-input-text', 'placeholder': _('Filter: tiktok, games, …') });
		filter.addEventListener('input', function() {
			var q = filter.value.trim().toLowerCase();
			labels.forEach(function(l) { l.style.display = !q || l.search.indexOf(q) >= 0 ? 'inline-block' : 'none'; });
			// A category with nothing left to show goes too, heading and all.
			fieldsets.forEach(function(f) {
				var shown = f.labels.some(function(l) { return l.style.display != 'none'; });
				f.style.display = shown ? '' : 'none';
			});
		});
		this.boxes = this.boxes || {};
		this.boxes[section_id] = boxes;
		return E('div', {}, [ filter ].concat(fieldsets));
	},

	formvalue: function(section_id) {
		return ((this.boxes || {})[section_id] || []).filter(function(b) { return b.checked; }).map(function(b) { return b.value; });
	}
});

return view.extend({
	load: function() {
		return Promise.all([
			uci.load('hydradns'),
			// The router's devices (DHCP leases, neighbours) as choices for
			// the exemptions; none where LuCI cannot tell.
			L.resolveDefault(network.getHostHints(), null),
			// The services a group can block; none if the gateway cannot say.
			L.resolveDefault(api.services(), []),
			// The exceptions in force, each group's under it; null if the
			// gateway cannot say.
			L.resolveDefault(api.exceptions(), null),
			api.utcOffset()
		]);
	},

	render: function(data) {
		var hosts = data && data[1];
		var catalogue = (data && data[2]) || [];
		var m = new form.Map('hydradns', _('HydraDNS: settings'),
			_('Every option is described in docs/configuration.md. Save & Apply checks the whole configuration with "hydradns check-config" first; a reload keeps the cache.'));
		var s, o;

		s = m.section(form.TypedSection, 'hydradns', _('Gateway'));
		s.anonymous = true;
		s.addremove = false;
		s.tab('general', _('General'));
		s.tab('blocking', _('Blocking'));
		s.tab('access', _('Access'));
		s.tab('forcedns', _('Force DNS'));
		s.tab('upstream', _('Upstream and cache'));
		s.tab('monitoring', _('Monitoring'));

		o = s.taboption('general', form.Flag, 'enabled', _('Enabled'));
		o.rmempty = false;
		o.default = '1';
		o = s.taboption('general', form.ListValue, 'dnsmasq_mode', _('With dnsmasq'),
			_('upstream: dnsmasq keeps port 53 and forwards to HydraDNS; replace: HydraDNS takes port 53 and dnsmasq answers local names; off: leave dnsmasq alone'));
		o.rmempty = false;
		o.value('upstream', _('behind dnsmasq: it keeps port 53 and asks HydraDNS (upstream)'));
		o.value('replace', _('instead of dnsmasq on port 53; dnsmasq answers local names (replace)'));
		o.value('off', _('leave dnsmasq alone (off)'));
		o.default = 'off';
		o = s.taboption('general', form.Flag, 'fail_open', _('Fail open'),
			_('When HydraDNS does not answer (crashed, hung), dnsmasq answers on its own, unfiltered, within 30 s, and the Overview says so. Off: no DNS until HydraDNS answers again.'));
		o.rmempty = false;
		o.default = '1';
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
		o = s.taboption('blocking', form.Flag, 'block_bypass', _('Keep browsers and phones on this resolver'),
			_('Answers use-application-dns.net (Firefox\'s canary for its own DNS over HTTPS) and mask.icloud.com, mask-h2.icloud.com (iCloud Private Relay) with NXDOMAIN, before any list: the devices then ask this gateway, and its lists apply to them. Allow lists do not reach these names; turn this off to let them resolve.'));
		o.rmempty = false;
		o.default = '1';
		o = s.taboption('blocking', form.Flag, 'rebind_protection', _('Rebind protection'));
		o.rmempty = false;
		o.default = '1';
		o = s.taboption('blocking', form.DynamicList, 'rebind_allow', _('Domains that may answer private addresses'));
		o = s.taboption('blocking', form.Value, 'refresh_interval', _('List refresh interval'));
		o.placeholder = '6h';

		o = s.taboption('access', form.DynamicList, 'allow_client', _('Clients allowed'), _('addresses or networks; none: the networks of the router\'s interfaces'));
		o = s.taboption('access', form.ListValue, 'deny_action', _('Other clients get'));
		o.rmempty = false;
		o.value('refuse', _('REFUSED'));
		o.value('drop', _('no answer'));
		o = s.taboption('access', form.Value, 'ratelimit', _('Queries per second per client'), _('0: no limit'));
		o.datatype = 'uinteger';
		o.placeholder = '0';

		o = s.taboption('forcedns', form.Flag, 'force_dns', _('Force DNS'),
			_('Devices asking another DNS server (port 53, such as 8.8.8.8) are answered by the router, filtered and logged under their name; DNS over TLS or QUIC (port 853) is refused so they fall back to plain DNS.'));
		o.rmempty = false;
		o.default = '0';
		o = s.taboption('forcedns', widgets.ZoneSelect, 'force_dns_zone', _('Zones'),
			_('The firewall zones whose devices are held to the router\'s DNS'));
		o.multiple = true;
		o.rmempty = false;
		listDefault(o, 'force_dns_zone', [ 'lan' ]);
		o = s.taboption('forcedns', form.DynamicList, 'force_dns_port', _('Ports'),
			_('53 is answered by the router; every other port listed (853: DNS over TLS and QUIC) is refused'));
		o.rmempty = false;
		o.validate = function(section_id, v) { return !v || ports(v); };
		listDefault(o, 'force_dns_port', [ '53', '853' ]);
		o = s.taboption('forcedns', form.DynamicList, 'force_dns_exempt', _('Devices left alone'),
			_('By IPv4 or IPv6 address, network (CIDR) or MAC: a DNS server of your own on the LAN, a laptop you test from'));
		o.placeholder = '192.168.1.2';
		o.validate = function(section_id, v) { return !v || exempt(v); };
		if (hosts)
			hosts.getMACHints(false).forEach(function(h) {
				o.value(h[0], '%s (%s)'.format(h[0], h[1]));
			});

		o = s.taboption('upstream', form.DynamicList, 'upstream', _('Upstream resolvers'),
			_('IP[:PORT], tls://NAME[:PORT][#IP] for DNS over TLS or https://NAME[:PORT]/PATH[#IP] for DNS over HTTPS (the certificate must carry NAME); none: the WAN\'s, from the resolv file'));
		o.placeholder = 'tls://dns.quad9.net#9.9.9.9';
		o = s.taboption('upstream', form.DynamicList, 'fallback', _('Fallback resolvers'),
			_('plain IP[:PORT], asked only when every upstream failed; none: nothing is ever sent in clear'));
		o = s.taboption('upstream', form.DynamicList, 'bootstrap', _('Bootstrap resolvers'),
			_('plain IP[:PORT] that find the addresses of tls:// and https:// names; none: the WAN\'s'));
		o = s.taboption('upstream', form.Flag, 'dnssec', _('Validate DNSSEC'),
			_('Check the signatures of the upstreams\' answers: a forged or broken one gets SERVFAIL. Off for upstreams that filter (their block answers carry no signatures).'));
		o.rmempty = false;
		o.default = '0';
		o = s.taboption('upstream', form.ListValue, 'upstream_strategy', _('Strategy'));
		o.rmempty = false;
		o.value('failover', _('in order, the next when one fails (failover)'));
		o.value('random', _('one at random (random)'));
		o.value('parallel', _('all at once, the first answer wins (parallel)'));
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
		o = s.option(form.MultiValue, 'group', _('Groups'), _('none: the group "default"'));
		// None is `default` to the daemon, as a list's groups are: said so
		// in the grid rather than LuCI's "none".
		o.placeholder = 'default';
		// LuCI's grid takes a textvalue as markup: escaped, as its own.
		o.textvalue = function(section_id) {
			return '%h'.format(L.toArray(this.cfgvalue(section_id)).join(' ') || 'default');
		};
		choices(o, function(c) {
			c.value('default');
			uci.sections('hydradns', 'group').forEach(function(g) { c.value(g['.name']); });
		});

		s = m.section(form.TypedSection, 'group', _('Groups'),
			_('A group\'s lists are chosen on the Lists page; here, when they apply and how blocked names are answered.'));
		s.addremove = true;
		s.anonymous = false;
		// "always" and "as the gateway" are the option's absence: LuCI
		// removes an empty option, which is what the daemon reads as them
		// (rmempty false would refuse them as "must not be empty").
		o = s.option(form.ListValue, 'schedule', _('Schedule'));
		choices(o, function(c) {
			c.value('', _('always'));
			uci.sections('hydradns', 'schedule').forEach(function(t) { c.value(t['.name']); });
		});
		o = s.option(form.ListValue, 'block_mode', _('Answer for a blocked name'));
		o.value('', _('as the gateway'));
		blockModes(o);
		o = s.option(ServiceToggles, 'service', _('Blocked services'),
			_('Each blocks the service\'s domains and everything under them for this group, inside its schedule.'));
		o.catalogue = catalogue;
		o = s.option(form.Flag, 'safe_search', _('Safe search'),
			_('Google, Bing, DuckDuckGo, YouTube, Brave, Ecosia, Pixabay and Yandex answer with their restricted hosts.'));
		o.rmempty = false;
		o.default = '0';
		o = s.option(form.ListValue, 'youtube_restrict', _('YouTube'));
		o.rmempty = false;
		o.value('moderate', _('moderate'));
		o.value('strict', _('strict'));
		o.depends('safe_search', '1');
		o = s.option(form.ListValue, 'querylog', _('Query log'),
			_('What the log keeps of this group\'s devices; a device in several groups gets the most private.'));
		o.rmempty = false;
		o.value('full', _('everything'));
		o.value('anonymous', _('no address, MAC or name'));
		o.value('none', _('nothing (still counted)'));
		o = s.option(form.DynamicList, 'upstream', _('Upstreams'),
			_('The resolvers this group\'s devices are answered from while the group is in force (its schedule): IP[:PORT], tls://NAME[:PORT][#IP,…] or https://NAME[:PORT][/PATH][#IP,…]. Empty: the main upstreams (Gateway → Upstream and cache). A device in several groups with upstreams gets the first such group\'s.'));
		o.placeholder = _('IP, tls://NAME or https://NAME/PATH');
		o.validate = function(section_id, v) { return !v || upstream(v); };
		o = s.option(UpstreamPresets, '_preset', _('Presets'),
			_('Fills in the upstreams with a family resolver\'s, as its operator publishes them.'));
		o = s.option(form.Flag, 'fallback_main', _('Fall back to the main upstreams'),
			_('When every upstream of this group fails. Off: its devices get what a failure gives (an expired answer of its own, else SERVFAIL), never an answer from resolvers the group avoids.'));
		o.rmempty = false;
		o.default = '0';
		o = s.option(form.Flag, 'dnssec', _('Validate DNSSEC'),
			_('For this group\'s own upstreams (above); without them the main setting applies. Off for a family resolver that blocks: its block answers carry no signatures.'));
		o.rmempty = false;
		o.default = '0';
		o = s.option(GroupExceptions, '_exceptions', _('Exceptions now'),
			_('Allowed or blocked for a while (Queries → Allow or Block, for 1 hour or until tomorrow); each ends by itself.'));
		o.list = data && data[3];
		o.utcOffset = data && data[4];

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
		return api.saveApply(this, ev, mode, api.SETTINGS);
	}
});
