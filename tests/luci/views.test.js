// Unit tests of luci-app-hydradns's views in node:vm (harness.js), as
// openwrt/luci's CI tests luci-app-package-manager: the real view code,
// LuCI's classes stood in for. Run: node --test tests/luci/
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('fs');
const path = require('path');
const { world, text, find, byId, takeViolations, E, APP } = require('./harness.js');

// Data is text: a test after which a value that is not a constant reached
// innerHTML (LuCI's E() with a bare string child, dom.content, a modal's
// title, …) fails, naming the value and where it was set.
test.afterEach(() => {
	const found = takeViolations();
	assert.deepEqual(found, [], 'values set as innerHTML:\n' + found.map((v) => `<${v.tag}> ${JSON.stringify(v.html)}\n${v.where}`).join('\n'));
});

const fixture = (f) => JSON.parse(fs.readFileSync(path.join(__dirname, 'fixtures', f), 'utf8'));
const tick = () => new Promise((r) => setImmediate(r));

function statusWorld(status, extra) {
	return world(Object.assign({
		'luci.hydradns.status': () => status,
		'luci.hydradns.pause': () => ({ schema: 1 }),
		'luci.hydradns.resume': () => ({ schema: 1 })
	}, extra || {}));
}

test('overview shows the gateway\'s own numbers and polls every 5 s', async () => {
	const st = fixture('status.json');
	const w = statusWorld(st);
	const v = w.load('view.hydradns.status');
	const page = v.render(await v.load());
	assert.equal(text(byId(page, 'hydradns-state')), 'Running');
	assert.equal(text(byId(page, 'hydradns-queries')), String(st.stats.queries));
	const c = st.stats.counters;
	assert.equal(text(byId(page, 'hydradns-blocked')), `${c.blocked} (${(100 * c.blocked / st.stats.queries).toFixed(1)} %)`);
	assert.equal(text(byId(page, 'hydradns-blocking')), 'On');
	assert.match(text(page), /127\.0\.0\.1:5399/);
	assert.match(text(page), /kids/, 'a second group is listed with its pause button');
	assert.deepEqual(w.polls.map((p) => p.interval), [ 5 ]);
	assert.equal(find(page, (n) => n.attrs.id === 'hydradns-resume')[0].attrs.disabled, true, 'nothing to resume');
});

test('overview: a DNSSEC line once answers were validated, and while signature dates wait for the clock', async () => {
	const st = fixture('status.json');
	const w = statusWorld(st);
	const v = w.load('view.hydradns.status');
	const page = v.render(await v.load());
	assert.equal(byId(page, 'hydradns-dnssec'), undefined, 'no line while nothing validates');
	Object.assign(st.stats.counters, { dnssec_secure: 40, dnssec_insecure: 7, dnssec_bogus: 2, dnssec_indeterminate: 1 });
	v.fill(st);
	assert.equal(text(byId(v.box, 'hydradns-dnssec')), '40 secure, 7 insecure, 2 bogus (SERVFAIL), 1 undecided');
	st.stats.dnssec_clock_wait = '/var/state/dnsmasqsec<img src=x onerror=alert(1)>';
	v.fill(st);
	assert.match(text(byId(v.box, 'hydradns-dnssec')), /not checked until the router's clock is known good$/);
	assert.doesNotMatch(text(byId(v.box, 'hydradns-dnssec')), /img/, 'the path is not shown');
});

test('the pause buttons pause for 5 min, 1 h and until resumed, and the countdown follows the router\'s clock', async () => {
	const st = fixture('status.json');
	const w = statusWorld(st);
	const v = w.load('view.hydradns.status');
	const page = v.render(await v.load());
	for (const [ id, duration ] of [ [ 'hydradns-pause-5m', '5m' ], [ 'hydradns-pause-1h', '1h' ], [ 'hydradns-pause-forever', '3650d' ] ]) {
		await byId(page, id).attrs.click();
		assert.deepEqual(w.calls.filter((c) => c.method === 'pause').pop().args, { duration, group: '' });
	}
	st.stats.paused_until = st.now + 125;
	v.fill(st);
	assert.equal(text(byId(v.box, 'hydradns-blocking')), 'Paused, 2m 5s left');
	st.stats.paused_until = st.now + 3650 * 86400;
	v.fill(st);
	assert.equal(text(byId(v.box, 'hydradns-blocking')), 'Paused, until resumed');
	await byId(v.box, 'hydradns-resume').attrs.click();
	assert.deepEqual(w.calls.filter((c) => c.method === 'resume').pop().args, { group: '' });
});

test('the Status → Overview box shows the figures and links to the pages', async () => {
	const st = fixture('status.json');
	st.stats.paused_until = st.now + 60;
	const w = statusWorld(st);
	const box = w.load('view.status.include.75_hydradns');
	assert.equal(box.title, 'HydraDNS');
	const node = box.render(await box.load());
	assert.equal(text(byId(node, 'hydradns-overview-queries')), String(st.stats.queries));
	assert.match(text(byId(node, 'hydradns-overview-blocked')), /^\d+ \(\d+\.\d %\)$/);
	assert.equal(text(byId(node, 'hydradns-overview-blocking')), 'Paused, 1m 0s left');
	assert.equal(text(byId(node, 'hydradns-overview-upstreams')), '1 of 1 up');
	assert.equal(find(node, (n) => n.tag === 'a')[0].attrs.href, '/cgi-bin/luci/admin/services/hydradns');

	const down = statusWorld({ schema: 1, running: false, error: 'no gateway' }).load('view.status.include.75_hydradns');
	assert.equal(text(byId(down.render(await down.load()), 'hydradns-overview-state')), 'Not running');
});

test('while DNS is failed open the overview warns, since when on the router\'s clock and why; filtered, no warning', async () => {
	const st = fixture('status.json');
	assert.equal(st.unfiltered_since, 0, 'the binary\'s JSON has the field, 0 while filtered');
	let w = statusWorld(st);
	let v = w.load('view.hydradns.status');
	let page = v.render(await v.load());
	assert.equal(byId(page, 'hydradns-unfiltered'), undefined);
	assert.ok(!/DNS is unfiltered/.test(text(page)));
	assert.ok(!w.calls.some((c) => c.object === 'system'), 'the router\'s clock is not asked while filtered');

	// 2026-12-04 11:03:00 UTC, the router an hour east of UTC (its procd's
	// localtime), the browser wherever it is.
	const since = 1796382180;
	const down = Object.assign(fixture('status.json'), {
		now: since + 125, unfiltered_since: since,
		unfiltered_reason: 'it does not answer on 127.0.0.1:5353: no answer in 1.5s'
	});
	w = statusWorld(down, { 'system.info': () => ({ localtime: since + 125 + 3600 + 1, uptime: 99 }) });
	v = w.load('view.hydradns.status');
	page = v.render(await v.load());
	const banner = byId(page, 'hydradns-unfiltered');
	assert.equal(banner.attrs.class, 'alert-message warning');
	assert.equal(text(banner), 'DNS is unfiltered since 12:03 (2m 5s ago): the gateway does not answer (it does not answer on 127.0.0.1:5353: no answer in 1.5s). dnsmasq answers every device on its own, without block lists; filtering resumes within 30 s of HydraDNS answering again.');
	assert.equal(page.children[2].children[0], banner, 'the warning comes first');
	assert.equal(text(byId(page, 'hydradns-state')), 'Running', 'the daemon may be back before the watchdog has seen two answers');

	// A day later: the date too. Stopped (crashed, not respawned): still warned.
	const stopped = { schema: 1, running: false, now: since + 86400, error: 'cannot reach the gateway', lists: [], unfiltered_since: since, unfiltered_reason: 'nothing listens on 127.0.0.1:5353' };
	v.fill(Object.assign(stopped, { utc_offset: 3600 }));
	assert.match(text(byId(v.box, 'hydradns-unfiltered')), /^DNS is unfiltered since 2026-12-04 12:03 \(1d 0h ago\): the gateway does not answer \(nothing listens on 127\.0\.0\.1:5353\)/);
	assert.equal(text(byId(v.box, 'hydradns-state')), 'Not running');

	// A login that may not read the router's clock: how long, not since when.
	w = statusWorld(down, { 'system.info': () => { throw new Error('Access denied'); } });
	const box = w.load('view.status.include.75_hydradns');
	const node = box.render(await box.load());
	assert.match(text(byId(node, 'hydradns-overview-unfiltered')), /^DNS has been unfiltered for 2m 5s: the gateway does not answer \(it does not answer on/);
	assert.equal(node.children[0], byId(node, 'hydradns-overview-unfiltered'), 'the box\'s warning comes first');
	down.unfiltered_since = 0;
	assert.equal(byId(box.render(await box.load()), 'hydradns-overview-unfiltered'), undefined, 'filtered again: no warning');
});

test('the overview says whether force DNS is on, for which zones, how many devices exempt, and what fail-open does', async () => {
	const show = async (main) => {
		const w = world({ 'luci.hydradns.status': () => fixture('status.json') },
			{ hydradns: [ Object.assign({ '.type': 'hydradns', '.name': 'main' }, main) ] });
		const v = w.load('view.hydradns.status');
		const page = v.render(await v.load());
		return [ text(byId(page, 'hydradns-force-dns')), text(byId(page, 'hydradns-fail-open')) ];
	};
	assert.deepEqual(await show({}), [ 'off', 'dnsmasq answers on its own, unfiltered (fail open)' ], 'the parser\'s defaults');
	assert.deepEqual(await show({ force_dns: '1' }), [ 'on (lan)', 'dnsmasq answers on its own, unfiltered (fail open)' ]);
	assert.deepEqual(await show({ force_dns: '1', force_dns_zone: [ 'lan', 'guest' ], force_dns_exempt: [ '192.168.1.2', '02:00:5e:10:00:01' ], fail_open: '0' }),
		[ 'on (lan, guest), 2 devices exempt', 'the network has no DNS until it answers again' ]);
	assert.deepEqual((await show({ force_dns: 'yes', force_dns_exempt: '192.168.1.2' }))[0], 'on (lan), 1 device exempt');
});

test('a stopped gateway says so and why, and still lists the lists', async () => {
	const w = statusWorld({ schema: 1, running: false, error: 'connecting to /var/run/hydradns/control.sock: No such file or directory', lists: [ { name: 'ads', kind: 'blocklist', entries: 7, files: [ '/etc/hydradns/ads.txt' ] } ] });
	const v = w.load('view.hydradns.status');
	const page = v.render(await v.load());
	assert.equal(text(byId(page, 'hydradns-state')), 'Not running');
	assert.match(text(byId(page, 'hydradns-error')), /control\.sock/);
	assert.match(text(page), /ads.*block.*7.*local file/);
});

test('a reply of another schema is refused with a message, not misread', async () => {
	const w = statusWorld({ schema: 2, running: true, stats: {} });
	const v = w.load('view.hydradns.status');
	const st = await v.load();
	assert.equal(st.running, false);
	assert.match(st.error, /schema 2/);
});

test('queries: blocked rows offer Allow, others Block, each asking for whom, with Undo; Why?; the filter goes to the plugin as typed', async () => {
	const log = fixture('log.json');
	const w = world({
		'luci.hydradns.top': (a) => ({ schema: 1, entries: a.kind === 'blocked' ? [ { key: 'ads.example', count: 3 } ] : [ { key: 'laptop (192.0.2.7)', count: 9 } ] }),
		'luci.hydradns.log': () => log,
		'luci.hydradns.allow': (a) => ({ allowlist: a.domain, groups: a.client ? 'default kids' : '', undo: a.client ? 'luci_allow_kids:0 luci_block_kids:1' : 'luci_allow:0 luci_block:0' }),
		'luci.hydradns.block': (a) => ({ blocklist: a.domain, groups: '', undo: 'luci_block:0 luci_allow:0' }),
		'luci.hydradns.undo': (a) => ({ undone: a.domain }),
		'luci.hydradns.check': (a) => ({ output: `${a.name}: blocked by list 'ads' (entry ads.example)` }),
		'system.info': () => ({ localtime: Math.round(Date.now() / 1000) + 3600 })
	});
	const v = w.load('view.hydradns.queries');
	const page = v.render(await v.load());
	const rows = find(byId(page, 'hydradns-log'), (n) => n.tag === 'tr').slice(1);
	assert.equal(rows.length, log.entries.length);
	log.entries.forEach((e, i) => {
		const button = find(rows[i], (n) => n.tag === 'button' && n.attrs['data-name'])[0];
		assert.equal(text(button), e.outcome === 'blocked' ? 'Allow' : 'Block', e.name);
		assert.equal(button.attrs['data-name'], e.name);
		assert.equal(text(rows[i].children[0]), new Date(e.unix_ms + 3600000).toISOString().replace('T', ' ').substr(0, 19),
			'the router\'s local time (UTC+1), with the date');
	});
	// Allow from a row: asked for whom; this device's groups; then Undo.
	const blockedRow = rows[log.entries.findIndex((e) => e.outcome === 'blocked')];
	await find(blockedRow, (n) => n.attrs['data-name'])[0].attrs.click();
	assert.ok(w.ui.modal, 'it asks');
	await byId(w.ui.modal.node, 'hydradns-decide-device').attrs.click();
	assert.deepEqual(w.calls.filter((c) => c.method === 'allow').pop().args, { domain: 'ads.example', client: '127.0.0.1' });
	const note = w.notes.pop();
	assert.match(note.text, /ads\.example is allowed for the groups default kids/);
	await byId(note.body, 'hydradns-undo').attrs.click();
	assert.deepEqual(w.calls.filter((c) => c.method === 'undo').pop().args, { domain: 'ads.example', undo: 'luci_allow_kids:0 luci_block_kids:1' });
	assert.match(w.notes.pop().text, /as before/);
	// From the top blocked names (no device): every group only.
	await find(byId(page, 'hydradns-top-blocked'), (n) => n.tag === 'button')[0].attrs.click();
	assert.equal(byId(w.ui.modal.node, 'hydradns-decide-device'), undefined);
	await byId(w.ui.modal.node, 'hydradns-decide-all').attrs.click();
	assert.deepEqual(w.calls.filter((c) => c.method === 'allow').pop().args, { domain: 'ads.example', client: '' });
	assert.match(w.notes.pop().text, /ads\.example is allowed for every group/);
	// Why?
	await find(blockedRow, (n) => n.attrs['data-why'])[0].attrs.click();
	assert.deepEqual(w.calls.filter((c) => c.method === 'check').pop().args, { name: 'ads.example', client: '127.0.0.1' });
	assert.match(text(byId(w.ui.modal.node, 'hydradns-why')), /blocked by list 'ads'/);
	assert.match(text(byId(page, 'hydradns-top-clients')), /laptop \(192\.0\.2\.7\)9/);
	assert.equal(find(page, (n) => n.tag === 'option' && n.attrs.value === '192.0.2.7').length, 1, 'the device picker knows it');

	byId(page, 'hydradns-filter-domain').value = ' *.example ';
	byId(page, 'hydradns-filter-client').value = 'laptop';
	byId(page, 'hydradns-filter-blocked').checked = false;
	byId(page, 'hydradns-filter-outcome').value = 'cached';
	byId(page, 'hydradns-filter-list').value = '';
	await byId(page, 'hydradns-filter-apply').attrs.click();
	assert.deepEqual(w.calls.pop().args, { limit: 100, domain: '*.example', client: 'laptop', blocked: 0, before: 0, outcome: 'cached', list: '', group: '' });
});

test('queries: pages of 100 through the log, by row id; auto-refresh only on the newest page when asked', async () => {
	const all = [];
	for (let i = 0; i < 250; i++)
		all.push({ id: 1000 - i, unix_ms: 1796272820000 - i * 1000, client: '127.0.0.1', name: `n${i}.example`, type: 'A', outcome: 'cached', rcode: 'NOERROR', latency_us: 5 });
	const w = world({
		'luci.hydradns.top': () => ({ schema: 1, entries: [] }),
		'luci.hydradns.log': (a) => ({ schema: 1, entries: all.filter((r) => !a.before || r.id < a.before).slice(0, a.limit) })
	});
	const v = w.load('view.hydradns.queries');
	const page = v.render(await v.load());
	const names = () => find(byId(v.recent, 'hydradns-log'), (n) => n.tag === 'tr').slice(1).map((r) => text(r.children[2]));
	assert.equal(names().length, 100);
	assert.equal(byId(v.recent, 'hydradns-page-newer').attrs.disabled, true);
	await byId(v.recent, 'hydradns-page-older').attrs.click();
	assert.deepEqual([ names()[0], names().length ], [ 'n100.example', 100 ]);
	assert.equal(text(byId(v.recent, 'hydradns-page-rows')), 'rows 101 to 200');
	await byId(v.recent, 'hydradns-page-older').attrs.click();
	assert.deepEqual([ names()[0], names().length ], [ 'n200.example', 50 ]);
	assert.equal(byId(v.recent, 'hydradns-page-older').attrs.disabled, true, 'the last page');
	await byId(v.recent, 'hydradns-page-newer').attrs.click();
	assert.equal(names()[0], 'n100.example');
	const logCalls = () => w.calls.filter((c) => c.method === 'log').length;
	let n = logCalls();
	await w.polls[0].fn();
	assert.equal(logCalls(), n, 'no refresh unless asked');
	const auto = byId(page, 'hydradns-auto-refresh');
	auto.checked = true;
	auto.listeners.change();
	await w.polls[0].fn();
	assert.equal(logCalls(), n, 'nor on an older page');
	await byId(v.recent, 'hydradns-page-newest').attrs.click();
	n = logCalls();
	await w.polls[0].fn();
	assert.equal(logCalls(), n + 1, 'the newest page follows the log');
});

test('queries: a log that cannot be read says why instead of an empty table', async () => {
	const w = world({
		'luci.hydradns.top': () => ({ error: 'hydradns top: no query log (querylog disabled)' }),
		'luci.hydradns.log': () => ({ error: 'hydradns log: no query log (querylog disabled)' })
	});
	const v = w.load('view.hydradns.queries');
	const page = v.render(await v.load());
	assert.equal(find(page, (n) => (n.attrs.class || '').includes('warning')).length, 3);
	assert.match(text(page), /querylog disabled/);
});

test('Save & Apply: the staged config goes to check-config as UCI text; applied only if it passes', async () => {
	let verdict = { valid: false, output: 'config:2: option \'cache_size\': \'lots\' is not a number from 0 to 10000000' };
	const sent = [];
	const w = world({ 'luci.hydradns.check_config': (a) => { sent.push(a.config); return verdict; } }, {
		hydradns: [
			{ '.type': 'hydradns', '.name': 'main', '.anonymous': false, listen: [ '127.0.0.1:5353', '[::1]:5353' ], cache_size: 'lots' },
			{ '.type': 'blocklist', '.name': 'cfg02', '.anonymous': true, name: 'it\'s mine', domain: [ 'a.example' ] }
		]
	});
	const api = w.load('hydradns.api');
	const view = { handleSave: () => Promise.resolve() };
	assert.equal(await api.saveApply(view, null, '0'), false);
	assert.equal(sent[0], "config hydradns 'main'\n\toption cache_size 'lots'\n\tlist listen '127.0.0.1:5353'\n\tlist listen '[::1]:5353'\n\n" +
		"config blocklist\n\tlist domain 'a.example'\n\toption name 'it'\\''s mine'\n");
	assert.deepEqual(w.applied, []);
	const note = w.notes.pop();
	assert.equal(note.title, 'HydraDNS refuses this configuration');
	assert.match(note.text, /Section main.*not a number.*option cache_size 'lots'/);
	verdict = { valid: true, output: 'ok' };
	assert.equal(await api.saveApply(view, null, '0'), true);
	assert.deepEqual(w.applied, [ true ]);
});

test('settings and lists offer only options the daemon documents, and flags keep their values', async () => {
	const doc = fs.readFileSync(path.join(APP, '../../docs/configuration.md'), 'utf8');
	for (const name of [ 'view.hydradns.settings', 'view.hydradns.lists' ]) {
		const w = world({ 'luci.hydradns.status': () => ({ schema: 1, running: true, lists: [] }) }, { hydradns: [] });
		const v = w.load(name);
		await v.render(await v.load());
		const map = w.form.maps[0];
		assert.equal(map.config, 'hydradns');
		for (const s of map.sections) {
			assert.ok(doc.includes('config ' + s.type), `${name}: section ${s.type} is not in docs/configuration.md`);
			for (const o of s.options.filter((o) => !o.name.startsWith('_'))) {
				assert.ok(doc.includes('`' + o.name + '`'), `${name}: option ${o.name} is not in docs/configuration.md`);
				// A choice whose empty value is the option's absence ("always",
				// "as the gateway") is meant to be removed; any other must stay.
				if (o.cls === 'ListValue' && o.values[0] === '')
					assert.notEqual(o.rmempty, false, `${name}: ${o.name}: LuCI refuses its empty choice as "must not be empty"`);
				else if (o.cls === 'Flag' || o.cls === 'ListValue')
					assert.equal(o.rmempty, false, `${name}: ${o.name} would be deleted when equal to its default`);
			}
		}
	}
});

test('settings: a group\'s services as toggles by category with a filter, safe search and its query log', async () => {
	const catalogue = [
		{ id: 'tiktok', name: 'TikTok', category: 'video', domains: [ 'tiktok.com' ] },
		{ id: 'roblox', name: 'Roblox', category: 'games', domains: [ 'roblox.com', 'rbxcdn.com' ] }
	];
	const w = world({ 'luci.hydradns.services': () => ({ schema: 1, services: catalogue }) },
		{ hydradns: [ { '.type': 'group', '.name': 'kids', '.anonymous': false, service: [ 'tiktok', 'gone' ] } ] });
	const v = w.load('view.hydradns.settings');
	await v.render(await v.load());
	assert.ok(w.calls.some((c) => c.method === 'services'));
	const g = w.form.maps[0].sections.find((s) => s.type === 'group');
	const opt = (name) => g.options.find((o) => o.name === name);
	assert.deepEqual([ 'service', 'safe_search', 'youtube_restrict', 'querylog' ].map((n) => opt(n).cls),
		[ 'CBI.HydraDNSServices', 'Flag', 'ListValue', 'ListValue' ]);
	assert.deepEqual(opt('youtube_restrict').values, [ 'moderate', 'strict' ]);
	assert.deepEqual(opt('youtube_restrict').deps, [ [ 'safe_search', '1' ] ]);
	assert.deepEqual(opt('querylog').values, [ 'full', 'anonymous', 'none' ]);

	const widget = opt('service').renderWidget('kids', 0, [ 'tiktok', 'gone' ]);
	assert.deepEqual(find(widget, (n) => n.tag === 'legend').map(text), [ 'games', 'not in the catalogue', 'video' ]);
	const boxes = find(widget, (n) => n.tag === 'input' && n.attrs.type === 'checkbox');
	assert.deepEqual(boxes.map((b) => [ b.attrs.value, b.attrs.checked ]), [ [ 'roblox', null ], [ 'gone', '' ], [ 'tiktok', '' ] ],
		'what the group lists is checked; an id the catalogue lacks is kept');
	// What a browser's DOM makes of the attributes.
	boxes.forEach((b) => { b.checked = b.attrs.checked === ''; b.value = b.attrs.value; });
	boxes[0].checked = true;
	assert.deepEqual([ ...opt('service').formvalue('kids') ], [ 'roblox', 'gone', 'tiktok' ]);
	// The filter matches names, ids and domains.
	const filter = find(widget, (n) => n.tag === 'input' && n.attrs.type === 'text')[0];
	filter.value = 'RBX';
	filter.listeners.input();
	assert.deepEqual(find(widget, (n) => n.tag === 'label').map((l) => l.style.display), [ 'inline-block', 'none', 'none' ]);
	assert.deepEqual(find(widget, (n) => n.tag === 'fieldset').map((f) => f.style.display), [ '', 'none', 'none' ],
		'a category with nothing left goes, heading and all');
	filter.value = '';
	filter.listeners.input();
	assert.ok(find(widget, (n) => n.tag === 'label').every((l) => l.style.display === 'inline-block'));
});

test('settings: force DNS has its own tab, with the parser\'s defaults; fail-open is in General', async () => {
	const w = world({}, { hydradns: [ { '.type': 'hydradns', '.name': 'main', '.anonymous': false, enabled: '1' } ] },
		[ [ '02:00:5e:10:00:01', 'kids-tablet' ] ]);
	const v = w.load('view.hydradns.settings');
	await v.render(await v.load());
	const s = w.form.maps[0].sections[0];
	assert.ok(s.tabs.some((t) => t.name === 'forcedns' && t.title === 'Force DNS'));
	const opt = (name) => s.options.find((o) => o.name === name);
	assert.deepEqual(s.options.filter((o) => o.tab === 'forcedns').map((o) => o.name),
		[ 'force_dns', 'force_dns_zone', 'force_dns_port', 'force_dns_exempt' ]);
	assert.equal(opt('fail_open').tab, 'general');

	// Flags: the parser's defaults (force_dns off, fail_open on), always written.
	assert.deepEqual([ opt('force_dns').cls, opt('force_dns').default, opt('force_dns').rmempty ], [ 'Flag', '0', false ]);
	assert.deepEqual([ opt('fail_open').cls, opt('fail_open').default, opt('fail_open').rmempty ], [ 'Flag', '1', false ]);
	assert.match(opt('force_dns').description, /port 53.*answered by the router.*port 853.*refused so they fall back/);
	assert.match(opt('fail_open').description, /dnsmasq answers on its own, unfiltered, within 30 s/);

	// Lists: missing, they show the parser's default, which LuCI then sees
	// as unchanged and does not write; present, what the file says.
	const zone = opt('force_dns_zone'), port = opt('force_dns_port'), ex = opt('force_dns_exempt');
	assert.deepEqual([ zone.cls, zone.multiple, zone.rmempty ], [ 'ZoneSelect', true, false ], 'the firewall\'s zones, as LuCI offers them');
	assert.deepEqual([ ...zone.cfgvalue('main') ], [ 'lan' ]);
	assert.deepEqual([ ...port.cfgvalue('main') ], [ '53', '853' ]);
	w.uci.data.hydradns[0].force_dns_port = [ '53' ];
	w.uci.data.hydradns[0].force_dns_zone = [ 'lan', 'guest' ];
	assert.deepEqual([ ...port.cfgvalue('main') ], [ '53' ]);
	assert.deepEqual([ ...zone.cfgvalue('main') ], [ 'lan', 'guest' ]);
	assert.ok(!Object.hasOwn(ex, 'cfgvalue'), 'no default: none exempt');

	// Checked in the browser as the parser checks them.
	for (const good of [ '53', '853', '53 853 5353', '65535' ])
		assert.equal(port.validate('main', good), true, good);
	for (const bad of [ '0', '65536', 'dns', '53,853', '-1' ])
		assert.notEqual(port.validate('main', bad), true, bad);
	for (const good of [ '', '192.168.1.2', '192.168.1.0/28', '10.0.0.0/8', '2001:db8::7', '2001:db8::/64', 'fe80::1',
		'::ffff:192.0.2.1', '2001:db8:0:0:0:0:0:1', '02:00:5e:10:00:01', '02-00-5E-10-00-01', ' 192.168.1.2 ' ])
		assert.equal(ex.validate('main', good), true, good);
	for (const bad of [ 'laptop', '192.168.1.256', '192.168.1.2/33', '192.168.01.2', '2001:db8::/129', '2001:db8::7::1',
		'2001:db8:0:0:0:0:0:0:1', '12345::', '02:00:5e:10:00', '02:00:5e:10:00:01:02', '192.168.1.2; reboot', '192.168.1.0/255.255.255.0' ])
		assert.match(ex.validate('main', bad), /an IPv4 or IPv6 address, a network/, bad);
	// The router's devices offered by MAC, with their names.
	assert.deepEqual(ex.values, [ '02:00:5e:10:00:01' ]);
	assert.equal(ex.labels['02:00:5e:10:00:01'], '02:00:5e:10:00:01 (kids-tablet)');
});

test('issue 48: a read-only login gets no Pause, Resume, Allow, Block or Update buttons', async () => {
	const st = fixture('status.json');
	st.stats.paused_until = st.now + 60;
	const w = statusWorld(st, {
		'luci.hydradns.top': () => ({ schema: 1, entries: [ { key: 'ads.example', count: 3 } ] }),
		'luci.hydradns.log': () => fixture('log.json')
	});
	w.L.env.readonly = true;
	const v = w.load('view.hydradns.status');
	const page = v.render(await v.load());
	assert.equal(find(page, (n) => n.tag === 'button').length, 0, 'no buttons on the overview');
	assert.equal(text(byId(page, 'hydradns-blocking')), 'Paused, 1m 0s left', 'the state is still shown');
	assert.match(text(page), /kids/, 'and the groups');
	const q = w.load('view.hydradns.queries');
	const qp = q.render(await q.load());
	assert.equal(find(qp, (n) => n.tag === 'button' && n.attrs['data-name']).length, 0, 'no Allow or Block');
	w.L.env.readonly = false;
	assert.ok(find(q.render(await q.load()), (n) => n.tag === 'button' && n.attrs['data-name']).length > 0, 'a login that may write has them');
});

test('issue 48: a refused config: running with the previous one, the refusal and Revert', async () => {
	const st = Object.assign(fixture('status.json'), { refused: 'config:12: option upstream_timeout: \'soon\' is not a duration' });
	const w = statusWorld(st, { 'luci.hydradns.revert': () => ({ reverted: true }) });
	const v = w.load('view.hydradns.status');
	const page = v.render(await v.load());
	assert.equal(text(byId(page, 'hydradns-state')), 'Running with the previous configuration');
	assert.match(text(byId(page, 'hydradns-refused')), /upstream_timeout: 'soon'/);
	assert.ok(byId(page, 'hydradns-pause-5m'), 'the pause buttons stay');
	await byId(page, 'hydradns-revert').attrs.click();
	assert.ok(w.calls.some((c) => c.method === 'revert'));
	delete st.refused;
	v.fill(st);
	assert.equal(byId(v.box, 'hydradns-refused'), undefined);
	assert.equal(text(byId(v.box, 'hydradns-state')), 'Running');
});

test('issue 48: a page\'s Save & Apply refuses while another page has changes staged', async () => {
	const w = world({ 'luci.hydradns.check_config': () => ({ valid: true, output: '' }) }, {
		hydradns: [
			{ '.type': 'group', '.name': 'kids', '.anonymous': false },
			{ '.type': 'blocklist', '.name': 'cfg02', '.anonymous': true, name: 'social', group: [ 'kids' ] }
		]
	});
	const api = w.load('hydradns.api');
	const view = { handleSave: () => Promise.resolve() };
	// Settings added the group (its Add stages it) and never applied it.
	w.uci.staged = { hydradns: [ [ 'add', 'kids', 'group' ], [ 'set', 'cfg02', 'group', 'kids' ] ] };
	assert.equal(await api.saveApply(view, null, '0', api.LISTS), false);
	assert.deepEqual(w.applied, []);
	const note = w.notes.pop();
	assert.match(note.text, /The Settings page has changes that are saved but not applied \(kids\)/);
	// Settings' own Save & Apply takes its group and the list together? No:
	// the list is the Lists page's.
	assert.equal(await api.saveApply(view, null, '0', api.SETTINGS), false);
	assert.match(w.notes.pop().text, /The Lists page has changes .*\(cfg02\)/);
	// Only its own: checked, then applied.
	w.uci.staged = { hydradns: [ [ 'set', 'cfg02', 'group', 'kids' ] ] };
	assert.equal(await api.saveApply(view, null, '0', api.LISTS), true);
	assert.deepEqual(w.applied, [ true ]);
});

test('issue 48: a group saves with "always" and "as the gateway"; a schedule or group just added is offered at once', async () => {
	const data = { hydradns: [ { '.type': 'group', '.name': 'guests', '.anonymous': false } ] };
	const w = world({ 'luci.hydradns.services': () => ({ schema: 1, services: [] }) }, data);
	const v = w.load('view.hydradns.settings');
	await v.render(await v.load());
	const sections = w.form.maps[0].sections;
	const opt = (type, name) => sections.find((s) => s.type === type).options.find((o) => o.name === name);
	const schedule = opt('group', 'schedule'), mode = opt('group', 'block_mode'), groups = opt('client', 'group');
	assert.notEqual(schedule.rmempty, false, 'empty ("always") is no option, not an error');
	assert.notEqual(mode.rmempty, false, 'empty ("as the gateway") is no option, not an error');
	assert.deepEqual([ ...schedule.keylist ], [ '' ]);
	assert.deepEqual([ ...groups.keylist ], [ 'default', 'guests' ]);
	// Added on the page: LuCI saves the form and loads it again.
	data.hydradns.push({ '.type': 'schedule', '.name': 'nights' }, { '.type': 'group', '.name': 'kids' });
	await schedule.load('guests');
	await groups.load('cfg01');
	assert.deepEqual([ ...schedule.keylist ], [ '', 'nights' ]);
	assert.deepEqual([ ...groups.keylist ], [ 'default', 'guests', 'kids' ]);
	// A device without groups is in default, and the grid says so.
	groups.cfgvalue = () => null;
	assert.equal(groups.textvalue('cfg01'), 'default');
	// So does the Lists page's grid for a list without groups.
	const lw = world({ 'luci.hydradns.status': () => ({ schema: 1, running: true, lists: [] }) }, { hydradns: [] });
	const lv = lw.load('view.hydradns.lists');
	await lv.render(await lv.load());
	const listGroups = lw.form.maps[0].sections.find((s) => s.type === 'blocklist').options.find((o) => o.name === 'group');
	listGroups.cfgvalue = () => null;
	assert.equal(listGroups.textvalue('cfg02'), 'default');
	listGroups.cfgvalue = () => [ 'kids' ];
	assert.equal(listGroups.textvalue('cfg02'), 'kids');
	const bypass = opt('hydradns', 'block_bypass');
	assert.equal(bypass.tab, 'blocking');
	assert.match(bypass.description, /use-application-dns\.net.*mask\.icloud\.com.*Allow lists do not reach these names/);
});

test('overview: health first in colour, the chart from stats --history, the tops as links, the service buttons', async () => {
	const st = fixture('status.json');
	st.boot = true;
	const buckets = [];
	for (let i = 0; i < 144; i++)
		buckets.push({ start: 1796347200 + i * 600, allowed: i % 3, blocked: i === 143 ? 5 : 0 });
	const w = statusWorld(st, {
		'luci.hydradns.history': () => ({ schema: 1, buckets }),
		'luci.hydradns.top': (a) => ({ schema: 1, entries: a.kind === 'clients' ? [ { key: 'kids-tablet (192.0.2.50)', count: 7 } ] : [ { key: 'ads.example', count: 3 } ] }),
		'luci.hydradns.service': (a) => ({ action: a.action })
	});
	const v = w.load('view.hydradns.status');
	const page = v.render(await v.load());
	const health = byId(page, 'hydradns-health');
	assert.equal(health.attrs['data-health'], 'running');
	assert.match(health.attrs.class, /alert-message success/);
	assert.equal(byId(page, 'hydradns-status').children[0], health, 'health comes first (after an unfiltered warning, if any)');
	const chart = byId(page, 'hydradns-chart');
	assert.equal(chart.children.length, 144, 'a bar per bucket');
	assert.equal(chart.attrs['data-allowed'], buckets.reduce((n, b) => n + b.allowed, 0));
	assert.equal(chart.attrs['data-blocked'], 5);
	assert.match(text(byId(page, 'hydradns-chart-totals')), /allowed: 144.*blocked: 5/);
	// The last bar: the tallest (7 queries), blocked (red) on top of allowed (green).
	const last = chart.children[143].children;
	assert.deepEqual([ ...last.map((d) => d.attrs.style) ], [ 'background:#d9534f;height:71.43%', 'background:#5cb85c;height:28.57%' ]);
	const link = find(byId(page, 'hydradns-top-blocked-names'), (n) => n.tag === 'a')[0];
	assert.equal(link.attrs.href, '/cgi-bin/luci/admin/services/hydradns/queries?domain=ads.example&blocked=1');
	assert.equal(find(byId(page, 'hydradns-top-clients'), (n) => n.tag === 'a')[0].attrs.href,
		'/cgi-bin/luci/admin/services/hydradns/queries?client=192.0.2.50', 'a named client by its address');
	assert.equal(byId(page, 'hydradns-service-start').attrs.disabled, true, 'running: no Start');
	assert.ok(byId(page, 'hydradns-service-disable'), 'enabled at boot: Disable offered');
	await byId(page, 'hydradns-service-restart').attrs.click();
	assert.ok(w.calls.some((c) => c.method === 'service' && c.args.action === 'restart'));
	// Amber: an upstream down; paused. Red: stopped, saying dnsmasq answers unfiltered.
	st.stats.upstreams[0].down = true;
	v.fill(st);
	assert.equal(byId(v.box, 'hydradns-health').attrs['data-health'], 'upstream-down');
	assert.match(byId(v.box, 'hydradns-health').attrs.class, /warning/);
	st.stats.paused_until = st.now + 600;
	v.fill(Object.assign(st, { utc_offset: 3600 }));
	assert.match(text(byId(v.box, 'hydradns-health')), /^Paused until \d\d:\d\d: nothing is blocked\.$/);
	v.fill({ schema: 1, running: false, error: 'not running', lists: [], boot: false });
	assert.equal(byId(v.box, 'hydradns-health').attrs['data-health'], 'stopped');
	assert.match(byId(v.box, 'hydradns-health').attrs.class, /danger/);
	assert.match(text(byId(v.box, 'hydradns-health')), /dnsmasq answers every device on its own, unfiltered/);
	assert.equal(byId(v.box, 'hydradns-service-start').attrs.disabled, null, 'stopped: Start');
	assert.ok(byId(v.box, 'hydradns-service-enable'), 'disabled at boot: Enable offered');
	// The chart's reading of the log waits for every 12th poll (a minute).
	const asked = () => w.calls.filter((c) => c.method === 'history').length;
	const before = asked();
	for (let i = 0; i < 11; i++) await w.polls[0].fn();
	assert.equal(asked(), before);
	await w.polls[0].fn();
	assert.equal(asked(), before + 1);
});

test('queries: opened from an Overview link, filtered as the link says', async () => {
	const w = world({
		'luci.hydradns.top': () => ({ schema: 1, entries: [] }),
		'luci.hydradns.log': () => fixture('log.json')
	});
	w.window.location = { search: '?domain=ads.example&blocked=1' };
	const v = w.load('view.hydradns.queries');
	const page = v.render(await v.load());
	assert.deepEqual(w.calls.filter((c) => c.method === 'log').pop().args, { limit: 100, domain: 'ads.example', client: '', blocked: 1, before: 0, outcome: '', list: '', group: '' });
	assert.equal(byId(page, 'hydradns-filter-domain').attrs.value, 'ads.example');
	assert.equal(byId(page, 'hydradns-filter-blocked').attrs.checked, true);
});

test('issue 48: tables label each cell with its column (phones), and settings say their values in words', async () => {
	const w = world({ 'luci.hydradns.services': () => ({ schema: 1, services: [] }) }, { hydradns: [] });
	const api = w.load('hydradns.api');
	const t = api.table([ 'Name', 'Queries', '' ], [ [ 'a.example', '3', 'x' ] ], 'id');
	const cells = find(t, (n) => n.tag === 'td');
	assert.deepEqual(cells.map((c) => c.attrs['data-title']), [ 'Name', 'Queries', null ]);
	const v = w.load('view.hydradns.settings');
	await v.render(await v.load());
	const opts = w.form.maps[0].sections.flatMap((s) => s.options);
	const labels = (name) => opts.find((o) => o.name === name).labels;
	assert.match(labels('dnsmasq_mode').upstream, /behind dnsmasq/);
	assert.match(labels('upstream_strategy').failover, /in order, the next when one fails/);
	assert.match(labels('block_mode').nxdomain, /no such name/);
	for (const name of [ 'dnsmasq_mode', 'upstream_strategy', 'block_mode', 'deny_action' ])
		for (const [ value, label ] of Object.entries(labels(name)))
			assert.ok(label && label !== value, `${name} ${value}: said in words`);
});

test('every method the pages call is in the ACL and the plugin; writes need the write ACL', () => {
	const acl = JSON.parse(fs.readFileSync(path.join(APP, 'root/usr/share/rpcd/acl.d/luci-app-hydradns.json'), 'utf8'))['luci-app-hydradns'];
	const read = acl.read.ubus['luci.hydradns'], write = acl.write.ubus['luci.hydradns'];
	const plugin = fs.readFileSync(path.join(APP, 'root/usr/libexec/rpcd/luci.hydradns'), 'utf8');
	const listed = Object.keys(JSON.parse(/cat << 'JSON'\n([\s\S]*?)\nJSON/.exec(plugin)[1]));
	const declared = [];
	for (const f of fs.readdirSync(path.join(APP, 'htdocs/luci-static/resources'), { recursive: true }).filter((f) => f.endsWith('.js'))) {
		const src = fs.readFileSync(path.join(APP, 'htdocs/luci-static/resources', f), 'utf8');
		for (const m of src.matchAll(/rpc\.declare\(\{\s*object:\s*'([^']+)',\s*method:\s*'([^']+)'/g)) {
			if (m[1] == 'luci.hydradns')
				declared.push(m[2]);
			else	// LuCI's own objects (the router's clock): read, by name.
				assert.ok((acl.read.ubus[m[1]] || []).includes(m[2]), `${f}: ${m[1]}.${m[2]} is not in the read ACL`);
		}
	}
	assert.ok(declared.length >= 9);
	for (const m of declared) {
		assert.ok(read.includes(m) || write.includes(m), `${m} is in no ACL`);
		assert.ok(listed.includes(m), `${m} is not in the plugin's list`);
	}
	assert.deepEqual([ ...read, ...write ].sort(), [ ...listed ].sort(), 'the ACL names exactly the plugin\'s methods');
	assert.deepEqual(read.sort(), [ 'check', 'devices', 'exceptions', 'history', 'log', 'services', 'status', 'top' ], 'read: the methods without side effects');
	for (const m of [ 'service', 'revert', 'pause', 'allow', 'block', 'undo', 'allow_for', 'block_for' ])
		assert.ok(write.includes(m), `${m} changes the router: write ACL`);
	// check_config runs hydradns as root on a config the caller sends: only
	// Save & Apply uses it, and a read-only login must not make root read
	// the files of its choosing.
	assert.ok(write.includes('check_config'), 'check_config needs the write ACL');
	assert.deepEqual(Object.keys(acl.write.ubus), [ 'luci.hydradns' ], 'nothing of LuCI\'s own to write');
	// The firewall's zones, offered for force_dns_zone; the LAN's devices for its exemptions.
	assert.deepEqual(acl.read.uci, [ 'hydradns', 'firewall' ]);
	assert.deepEqual(acl.read.ubus['luci-rpc'], [ 'getHostHints' ]);
	assert.deepEqual(acl.write.uci, [ 'hydradns' ]);
	const menu = JSON.parse(fs.readFileSync(path.join(APP, 'root/usr/share/luci/menu.d/luci-app-hydradns.json'), 'utf8'));
	for (const [ p, node ] of Object.entries(menu))
		if (node.action.type === 'view')
			assert.ok(fs.existsSync(path.join(APP, 'htdocs/luci-static/resources/view', node.action.path + '.js')), p);
	assert.deepEqual(menu['admin/services/hydradns'].depends.acl, [ 'luci-app-hydradns' ]);
});

// `hydradns devices --json` as the plugin passes it on.
const DEVICES = {
	schema: 1, since: 1796256000,
	devices: [
		{ name: 'kids-tablet', ip: '192.0.2.50', mac: '02:00:5e:10:00:01', groups: [ 'default' ], last_seen: 1796272800, queries: 40, blocked: 7 },
		{ ip: '127.0.0.1', groups: [ 'default' ], last_seen: 1796272700, queries: 12, blocked: 0 },
		{ name: 'nas', ip: '192.0.2.9', mac: '02:00:5e:10:00:09', rule: 'nas', groups: [ 'default', 'kids' ], last_seen: 0, queries: 0, blocked: 0 }
	]
};

function devicesWorld(check, uciData, devices) {
	return world({
		'luci.hydradns.devices': () => devices || DEVICES,
		'luci.hydradns.check_config': check || (() => ({ valid: true, output: '' })),
		'system.info': () => ({ localtime: Math.round(Date.now() / 1000) + 3600 })
	}, uciData || { hydradns: [
		{ '.type': 'group', '.name': 'kids', '.anonymous': false },
		{ '.type': 'client', '.name': 'cfg01', '.anonymous': true, name: 'nas', match: [ '02:00:5E:10:00:09' ], group: [ 'default', 'kids' ] }
	] });
}

test('devices: name, address, MAC, groups, last seen, today\'s queries, busiest first; a name opens the device\'s page', async () => {
	// As the daemon finds them: the config's, the files', the log's.
	const w = devicesWorld(null, null, Object.assign({}, DEVICES, { devices: DEVICES.devices.slice().reverse() }));
	const v = w.load('view.hydradns.devices');
	const page = v.render(await v.load());
	const rows = find(byId(page, 'hydradns-devices'), (n) => n.tag === 'tr').slice(1);
	assert.equal(rows.length, 3);
	assert.deepEqual([ ...rows[0].children.slice(0, 7).map(text) ],
		[ 'kids-tablet', '192.0.2.50', '02:00:5e:10:00:01', 'default', text(rows[0].children[4]), '40', '7' ]);
	// The router's clock is an hour ahead of UTC (system.info); the fixture's day is not today.
	assert.equal(text(rows[0].children[4]), '2026-12-03 05:40', 'last seen on the router\'s clock');
	assert.equal(text(rows[2].children[4]), 'not today');
	assert.equal(text(rows[1].children[0]), '127.0.0.1', 'no name: its address');
	assert.equal(find(rows[0], (n) => n.tag === 'a')[0].attrs.href, '/cgi-bin/luci/admin/services/hydradns/queries?client=192.0.2.50');
	w.L.env.readonly = true;
	assert.equal(find(v.render(await v.load()), (n) => n.tag === 'button').length, 0, 'no Add to group for a read-only login');
});

test('devices: Add to group writes a rule for the MAC (or updates its own), checked by the daemon before it is applied', async () => {
	let sent = null;
	const w = devicesWorld((a) => { sent = a.config; return { valid: true, output: '' }; });
	const v = w.load('view.hydradns.devices');
	const page = v.render(await v.load());
	const add = (key) => find(page, (n) => n.attrs['data-add'] === key)[0].attrs.click();
	await add('02:00:5e:10:00:01');
	const select = byId(w.ui.modal.node, 'hydradns-add-group');
	assert.deepEqual([ ...select.children.map((o) => o.attrs.value) ], [ 'kids' ], 'the groups it is not in');
	select.value = 'kids';
	assert.equal(await byId(w.ui.modal.node, 'hydradns-add-group-ok').attrs.click(), true);
	const made = w.uci.get('hydradns', 'new0');
	assert.deepEqual([ made['.type'], made.name, [ ...made.match ], [ ...made.group ] ], [ 'client', 'kids-tablet', [ '02:00:5e:10:00:01' ], [ 'default', 'kids' ] ]);
	assert.match(sent, /config client\n\toption group|config client\n[\s\S]*list match '02:00:5e:10:00:01'/);
	assert.deepEqual([ w.uci.saves, w.applied ], [ 1, [ true ] ], 'saved, then applied by LuCI (with its rollback)');
	// A device whose own rule matches its MAC (any case): that rule gets the group.
	await v.handleAdd(DEVICES.devices[2], 'guests');
	assert.deepEqual([ ...w.uci.get('hydradns', 'cfg01').group ], [ 'default', 'kids', 'guests' ]);
	assert.equal(w.uci.sections('hydradns', 'client').length, 2, 'no second rule for the same MAC');
	// No MAC: by address.
	await v.handleAdd(DEVICES.devices[1], 'kids');
	assert.deepEqual([ ...w.uci.sections('hydradns', 'client').pop().match ], [ '127.0.0.1' ]);
});

test('devices: a rule the daemon refuses is dropped, never saved or applied; another page\'s staged changes stop it', async () => {
	let lines = 0;
	const w = devicesWorld((a) => { lines = a.config.split('\n').length; return { valid: false, output: `config:${lines - 2}: client: group 'nope' is not a group` }; });
	const v = w.load('view.hydradns.devices');
	v.render(await v.load());
	assert.equal(await v.handleAdd(DEVICES.devices[0], 'nope'), false);
	assert.deepEqual([ w.uci.saves, w.uci.unloads, [ ...w.applied ] ], [ 0, 1, [] ]);
	assert.match(w.notes.pop().text, /^Section new0: client: group 'nope' is not a group/, 'the refusal, on the new rule');
	const w2 = devicesWorld();
	const v2 = w2.load('view.hydradns.devices');
	v2.render(await v2.load());
	w2.uci.staged = { hydradns: [ [ 'add', 'halfdone', 'group' ] ] };
	assert.equal(await v2.handleAdd(DEVICES.devices[0], 'kids'), false);
	assert.deepEqual([ w2.uci.edits.length, w2.uci.saves, w2.applied.length ], [ 0, 0, 0 ]);
	assert.match(w2.notes.pop().text, /The Settings or Lists page has changes .*\(halfdone\)/);
});

test('the device\'s page: the Queries page filtered to it, with its groups, their schedules now and the pause', async () => {
	const st = fixture('status.json');
	st.stats.groups[1] = Object.assign(st.stats.groups[1], { schedule: 'nights', active: false });
	st.stats.paused_until = st.now + 600;
	const w = world({
		'luci.hydradns.top': () => ({ schema: 1, entries: [] }),
		'luci.hydradns.log': () => fixture('log.json'),
		'luci.hydradns.devices': () => DEVICES,
		'luci.hydradns.status': () => st,
		'system.info': () => ({ localtime: st.now })
	});
	w.window.location = { search: '?client=192.0.2.9' };
	const v = w.load('view.hydradns.queries');
	const page = v.render(await v.load());
	const box = byId(page, 'hydradns-device');
	assert.ok(box, 'the device\'s box');
	assert.equal(page.children[1], box, 'first, under the title');
	assert.match(text(box), /Device: nas/);
	assert.equal(text(byId(box, 'hydradns-device-mac')), '02:00:5e:10:00:09');
	const rows = find(byId(box, 'hydradns-device-groups'), (n) => n.tag === 'tr').slice(1).map((r) => [ ...r.children.map(text) ]);
	assert.deepEqual(rows, [
		[ 'default', 'always', 'paused (all blocking), 10m 0s left' ],
		[ 'kids', 'nights (inactive now: its lists do not apply)', 'paused (all blocking), 10m 0s left' ]
	]);
	assert.deepEqual(w.calls.filter((c) => c.method === 'log').pop().args.client, '192.0.2.9', 'its queries below, with Why?, Allow, Block');
	assert.ok(find(page, (n) => n.attrs['data-why']).length > 0);
	// Unfiltered: no device box.
	const w2 = world({ 'luci.hydradns.top': () => ({ schema: 1, entries: [] }), 'luci.hydradns.log': () => fixture('log.json') });
	const v2 = w2.load('view.hydradns.queries');
	assert.equal(byId(v2.render(await v2.load()), 'hydradns-device'), undefined);
	assert.ok(!w2.calls.some((c) => c.method === 'devices'));
});

test('overview: during a global pause each group\'s Blocking says paused, not on', async () => {
	const st = fixture('status.json');
	const w = statusWorld(st);
	const v = w.load('view.hydradns.status');
	v.render(await v.load());
	const blocking = () => find(v.box, (n) => n.attrs.class === 'hydradns-group-blocking').map(text);
	assert.deepEqual([ ...blocking() ], [ 'on', 'on' ]);
	st.stats.paused_until = st.now + 300;
	v.fill(st);
	assert.deepEqual([ ...blocking() ], [ 'paused (all blocking), 5m 0s left', 'paused (all blocking), 5m 0s left' ]);
	st.stats.paused_until = 0;
	st.stats.groups[1].paused_until = st.now + 60;
	v.fill(st);
	assert.deepEqual([ ...blocking() ], [ 'on', 'paused, 1m 0s left' ]);
});

test('queries: filtered by group, the daemon finds the group\'s rows (hydradns log --group), paged by id', async () => {
	const rows = [];
	for (let i = 0; i < 300; i++)
		rows.push({ id: 5000 - i, unix_ms: 1796272820000 - i * 1000, client: [ '192.0.2.50', '127.0.0.1', '192.0.2.9' ][i % 3],
			name: `n${i}.example`, type: 'A', outcome: 'cached', rcode: 'NOERROR', latency_us: 5 });
	// As the daemon's client rules put them: only nas (192.0.2.9) in kids.
	const members = { kids: [ '192.0.2.9' ], default: [ '192.0.2.50', '127.0.0.1', '192.0.2.9' ] };
	const w = world({
		'luci.hydradns.top': () => ({ schema: 1, entries: [] }),
		'luci.hydradns.devices': () => DEVICES,
		'luci.hydradns.log': (a) => ({ schema: 1, entries: rows.filter((r) => (!a.client || r.client === a.client)
			&& (!a.group || members[a.group].includes(r.client)) && (!a.before || r.id < a.before)).slice(0, a.limit) })
	}, { hydradns: [ { '.type': 'group', '.name': 'kids', '.anonymous': false } ] });
	w.window.location = { search: '?group=kids' };
	const v = w.load('view.hydradns.queries');
	const page = v.render(await v.load());
	const options = find(byId(page, 'hydradns-filter-group'), (n) => n.tag === 'option');
	assert.deepEqual([ ...options.map((o) => o.attrs.value) ], [ '', 'default', 'kids' ]);
	assert.equal(options[2].attrs.selected, '', 'the link\'s group chosen');
	const clients = () => find(byId(v.recent, 'hydradns-log'), (n) => n.tag === 'tr').slice(1).map((r) => text(r.children[1]));
	assert.deepEqual([ ...new Set(clients()) ], [ '192.0.2.9' ]);
	assert.equal(clients().length, 100);
	const logCalls = () => w.calls.filter((c) => c.method === 'log').map((c) => [ c.args.group, c.args.client, c.args.before ]);
	assert.deepEqual(logCalls(), [ [ 'kids', '', 0 ] ], 'one call, the group asked for');
	for (const id of [ 'domain', 'client', 'list', 'outcome' ])
		byId(page, `hydradns-filter-${id}`).value = '';
	byId(page, 'hydradns-filter-group').value = 'default';
	await byId(page, 'hydradns-filter-apply').attrs.click();
	const names = () => find(byId(v.recent, 'hydradns-log'), (n) => n.tag === 'tr').slice(1).map((r) => text(r.children[2]));
	assert.deepEqual([ names().length, names()[0], names()[99] ], [ 100, 'n0.example', 'n99.example' ]);
	await byId(v.recent, 'hydradns-page-older').attrs.click();
	assert.deepEqual([ names()[0], names()[99] ], [ 'n100.example', 'n199.example' ], 'the next page of the group');
	assert.deepEqual(logCalls().slice(1), [ [ 'default', '', 0 ], [ 'default', '', 4901 ] ]);
});

// Issue 58: what comes from outside (list errors, list lines, the services
// catalogue, device names from leases, /etc/ethers and the config, group
// names, messages) is shown as text on every page. Each payload would run
// if it became markup; the harness records it if it reaches innerHTML
// (the afterEach above), and these say it is shown, as given.
const IMG = '<img src=x onerror="window.__pwned=1">';
const SVG = '<svg onload="window.__pwned=1">';
const QUOTES = `"quoted" & 'single'`;
const AMP = 'a&amp;b';

// `node` shows each of `values` as text, and holds no node parsed from markup.
function shownAsText(node, values, what) {
	const shown = text(node);
	for (const v of values)
		assert.ok(shown.includes(v), `${what}: ${JSON.stringify(v)} is shown as text in ${JSON.stringify(shown.slice(0, 400))}`);
	assert.deepEqual(find(node, (n) => n.parsed).map((n) => n.attrs.raw), [], `${what}: nothing parsed as markup`);
}

function hostileStatus() {
	const st = fixture('status.json');
	st.stats.version = QUOTES;
	st.stats.upstreams[0].addr = AMP;
	st.stats.groups.push({ name: IMG, blocked: 1, schedule: SVG, active: true, paused_until: 0 },
		{ name: '__proto__', blocked: 0, schedule: '', active: true, paused_until: 0 });
	st.lists = [
		{ name: IMG, kind: 'blocklist', url: 'http://lists.example/a', entries: 0, last_error: `download: 302 to ${SVG}` },
		{ name: '__proto__', kind: 'allowlist', url: 'http://lists.example/b', entries: 2, last_success: AMP }
	];
	return st;
}

test('issue 58: the overview shows list names and errors, groups, upstreams and the tops as text', async () => {
	const st = hostileStatus();
	const w = statusWorld(st, {
		'luci.hydradns.top': (a) => ({ schema: 1, entries: a.kind === 'clients' ? [ { key: `${IMG} (192.0.2.7)`, count: 2 } ] : [ { key: SVG, count: 3 } ] }),
		'luci.hydradns.history': () => ({ schema: 1, buckets: [] }),
		'luci.hydradns.pause': () => { throw new Error(IMG); }
	});
	const v = w.load('view.hydradns.status');
	const page = v.render(await v.load());
	shownAsText(byId(page, 'hydradns-health'), [ `Running, but list ${IMG} fails: download: 302 to ${SVG}` ], 'the health line');
	shownAsText(page, [ IMG, SVG, '__proto__', QUOTES, AMP, `download: 302 to ${SVG}`, `${IMG} (192.0.2.7)` ], 'the overview');
	const names = find(page, (n) => n.tag === 'td' && n.attrs['data-title'] === 'Group').map(text);
	assert.deepEqual(names, [ 'default', 'kids', IMG, '__proto__' ], 'every group, __proto__ too');
	assert.equal(find(byId(page, 'hydradns-top-clients'), (n) => n.tag === 'a')[0].attrs.href,
		'/cgi-bin/luci/admin/services/hydradns/queries?client=192.0.2.7');
	assert.equal(find(byId(page, 'hydradns-top-domains'), (n) => n.tag === 'a')[0].attrs.href,
		'/cgi-bin/luci/admin/services/hydradns/queries?domain=' + encodeURIComponent(SVG), 'an attribute, encoded');
	await byId(page, 'hydradns-pause-5m').attrs.click();
	shownAsText(w.notes.pop().body, [ `Pause failed: ${IMG}` ], 'a refusal');

	// Stopped, refused, unfiltered: the daemon's words as text.
	v.fill({ schema: 1, running: false, error: IMG, lists: st.lists, now: st.now, unfiltered_since: st.now - 5, unfiltered_reason: SVG, utc_offset: 0 });
	shownAsText(byId(v.box, 'hydradns-error'), [ IMG ], 'why it stopped');
	shownAsText(byId(v.box, 'hydradns-unfiltered'), [ `the gateway does not answer (${SVG}).` ], 'the unfiltered warning');
	v.fill(Object.assign(hostileStatus(), { refused: `config:3: ${IMG}` }));
	shownAsText(byId(v.box, 'hydradns-refused'), [ `config:3: ${IMG}` ], 'the refusal');
});

test('issue 58: the Status → Overview box shows the daemon\'s error and the unfiltered reason as text', async () => {
	const box = statusWorld({ schema: 1, running: false, error: IMG, now: 1796272821, unfiltered_since: 1796272800, unfiltered_reason: SVG })
		.load('view.status.include.75_hydradns');
	const node = box.render(await box.load());
	shownAsText(node, [ IMG, `(${SVG})` ], 'the box');
	const down = world({ 'luci.hydradns.status': () => { throw new Error(QUOTES); } }).load('view.status.include.75_hydradns');
	shownAsText(down.render(await down.load()), [ QUOTES ], 'an error of the call');
});

test('issue 58: the Lists page\'s grid shows list errors and group names as text; Update\'s refusal too', async () => {
	const st = hostileStatus();
	const w = world({ 'luci.hydradns.status': () => st, 'luci.hydradns.update': () => { throw new Error(SVG); } }, { hydradns: [
		{ '.type': 'blocklist', '.name': 'cfg01', '.anonymous': true, name: IMG, url: 'http://lists.example/a', group: [ SVG, '__proto__', AMP ] }
	] });
	const v = w.load('view.hydradns.lists');
	const page = await v.render(await v.load());
	const opt = (name) => w.form.maps[0].sections.find((s) => s.type === 'blocklist').options.find((o) => o.name === name);
	shownAsText(opt('_updated').gridCell('cfg01'), [ `failed: download: 302 to ${SVG}` ], 'last update');
	assert.equal(text(opt('_updated').gridCell('cfg01')), `failed: download: 302 to ${SVG}`);
	assert.equal(text(opt('group').gridCell('cfg01')), `${SVG} __proto__ ${AMP}`, 'the groups, as given');
	assert.equal(text(opt('name').gridCell('cfg01')), IMG);
	await byId(page, 'hydradns-update').attrs.click();
	shownAsText(w.notes.pop().body, [ `Update failed: ${SVG}` ], 'Update\'s refusal');
});

test('issue 58: settings list a hostile catalogue as text, a category named __proto__ like any other', async () => {
	const catalogue = [
		{ id: 'tiktok', name: IMG, category: SVG, domains: [ 'tiktok.com' ] },
		{ id: 'proto_one', name: 'Proto one', category: '__proto__', domains: [ 'one.example' ] },
		{ id: 'proto_two', name: QUOTES, category: '__proto__', domains: [ 'two.example' ] },
		{ id: 'ctor', name: AMP, category: 'constructor', domains: [ 'c.example' ] },
		{ id: 'roblox', name: 'Roblox', category: 'games', domains: [ 'roblox.com' ] }
	];
	const w = world({ 'luci.hydradns.services': () => ({ schema: 1, services: catalogue }) }, { hydradns: [
		{ '.type': 'group', '.name': 'kids', '.anonymous': false, service: [ 'proto_two', IMG ] },
		{ '.type': 'client', '.name': 'cfg01', '.anonymous': true, name: IMG, match: [ '02:00:5e:10:00:01' ], group: [ SVG, 'kids' ] }
	] }, [ [ '02:00:5e:10:00:01', IMG ] ]);
	const v = w.load('view.hydradns.settings');
	await v.render(await v.load());
	const sections = w.form.maps[0].sections;
	const opt = (type, name) => sections.find((s) => s.type === type).options.find((o) => o.name === name);
	const widget = opt('group', 'service').renderWidget('kids', 0, [ 'proto_two', IMG ]);
	shownAsText(widget, [ IMG, SVG, QUOTES, AMP, '__proto__', 'constructor' ], 'the services');
	const fieldsets = find(widget, (n) => n.tag === 'fieldset');
	const byLegend = Object.fromEntries(fieldsets.map((f) => [ text(find(f, (n) => n.tag === 'legend')[0]),
		find(f, (n) => n.tag === 'label').map((l) => [ text(l).trim(), find(l, (n) => n.tag === 'input')[0].attrs.value ]) ]));
	assert.deepEqual(Object.keys(byLegend).sort(), [ SVG, '__proto__', 'constructor', 'games', 'not in the catalogue' ].sort());
	assert.deepEqual(byLegend.__proto__, [ [ 'Proto one', 'proto_one' ], [ QUOTES, 'proto_two' ] ], 'its services, as another category\'s');
	assert.deepEqual(byLegend.constructor, [ [ AMP, 'ctor' ] ]);
	assert.deepEqual(byLegend['not in the catalogue'], [ [ IMG, IMG ] ], 'a configured id the catalogue lacks, as text');
	const boxes = find(widget, (n) => n.tag === 'input' && n.attrs.type === 'checkbox');
	assert.deepEqual(boxes.filter((b) => b.attrs.checked === '').map((b) => b.attrs.value).sort(), [ IMG, 'proto_two' ].sort());
	// The filter finds a __proto__ service, and hides the category that has none.
	const filter = find(widget, (n) => n.tag === 'input' && n.attrs.type === 'text')[0];
	filter.value = 'proto';
	filter.listeners.input();
	assert.deepEqual(fieldsets.filter((f) => f.style.display !== 'none').map((f) => text(find(f, (n) => n.tag === 'legend')[0])), [ '__proto__' ]);
	// The devices grid's groups; the router's devices by their DHCP names
	// (LuCI's dropdown shows a choice's label as text).
	assert.equal(text(opt('client', 'group').gridCell('cfg01')), `${SVG} kids`);
	assert.equal(text(opt('client', 'name').gridCell('cfg01')), IMG);
	assert.equal(opt('hydradns', 'force_dns_exempt').labels['02:00:5e:10:00:01'], `02:00:5e:10:00:01 (${IMG})`);
});

test('issue 58: queries show names, clients, lists, the Why? words and the dialogs\' titles as text', async () => {
	const log = { schema: 1, entries: [
		{ id: 9, unix_ms: 1796272820055, client: '192.0.2.7', client_name: IMG, name: SVG, type: QUOTES, outcome: 'blocked', rcode: 'NOERROR', list: AMP, latency_us: 5 },
		{ id: 8, unix_ms: 1796272820000, client: IMG, name: '__proto__', type: 'A', outcome: 'forwarded', rcode: 'NOERROR', latency_us: 5 }
	] };
	const why = `${SVG}: blocked by list 'ads' (0.0.0.0 ads.example # ${IMG})`;
	const w = world({
		'luci.hydradns.top': (a) => ({ schema: 1, entries: a.kind === 'blocked' ? [ { key: SVG, count: 3 } ] : [ { key: `${IMG} (192.0.2.7)`, count: 9 }, { key: QUOTES, count: 1 } ] }),
		'luci.hydradns.log': () => log,
		'luci.hydradns.check': (a) => (a.name === '__proto__' ? { error: `hydradns check: ${IMG}` } : { output: why }),
		'luci.hydradns.allow': () => ({ allowlist: SVG, groups: `${IMG} __proto__`, undo: 'luci_allow:0 luci_block:0' }),
		'luci.hydradns.undo': () => { throw new Error(QUOTES); }
	}, { hydradns: [ { '.type': 'group', '.name': 'kids' } ] });
	const v = w.load('view.hydradns.queries');
	const page = v.render(await v.load());
	shownAsText(byId(page, 'hydradns-log'), [ IMG, SVG, QUOTES, '__proto__', `blocked (${AMP})` ], 'the log');
	shownAsText(byId(page, 'hydradns-top-blocked'), [ SVG ], 'the top blocked');
	shownAsText(byId(page, 'hydradns-top-clients'), [ `${IMG} (192.0.2.7)`, QUOTES ], 'the top clients');
	const known = find(byId(page, 'hydradns-known-clients'), (n) => n.tag === 'option');
	assert.deepEqual(known.map((o) => [ o.attrs.value, text(o) ]), [ [ '192.0.2.7', IMG ], [ QUOTES, QUOTES ] ], 'the device picker');
	const rows = find(byId(page, 'hydradns-log'), (n) => n.tag === 'tr').slice(1);
	assert.equal(find(rows[0], (n) => n.attrs.title === '192.0.2.7').length, 1, 'the client name, its address as a title');

	await find(rows[0], (n) => n.attrs['data-why'])[0].attrs.click();
	shownAsText(w.ui.modal.head, [ `Why ${SVG} is answered so for ${IMG}` ], 'Why?\'s title');
	shownAsText(byId(w.ui.modal.node, 'hydradns-why'), [ why ], 'Why?\'s words');
	await find(rows[1], (n) => n.attrs['data-why'])[0].attrs.click();
	shownAsText(w.notes.pop().body, [ `hydradns check: ${IMG}` ], 'a refused check');

	await find(rows[0], (n) => n.attrs['data-name'])[0].attrs.click();
	shownAsText(w.ui.modal.head, [ `Allow ${SVG}` ], 'Allow\'s title');
	await byId(w.ui.modal.node, 'hydradns-decide-device').attrs.click();
	const note = w.notes.pop();
	shownAsText(note.body, [ `${SVG} is allowed for the groups ${IMG} __proto__; the gateway reloaded.` ], 'what Allow did');
	await byId(note.body, 'hydradns-undo').attrs.click();
	shownAsText(w.notes.pop().body, [ QUOTES ], 'Undo\'s refusal');
});

const HOSTILE_DEVICES = {
	schema: 1, since: 1796256000,
	devices: [
		{ name: IMG, ip: '192.0.2.50', mac: '02:00:5e:10:00:01', rule: SVG, groups: [ 'default', '__proto__' ], last_seen: 1796272800, queries: 40, blocked: 7 },
		{ name: QUOTES, ip: '192.0.2.51', groups: [ AMP ], last_seen: 0, queries: 1, blocked: 0 },
		{ name: '__proto__', ip: '192.0.2.52', mac: '02:00:5e:10:00:02', groups: [ 'default', 'kids' ], last_seen: 0, queries: 0, blocked: 0 }
	]
};

test('issue 58: devices show names and groups as text, in the row, the Add to group dialog and its notes', async () => {
	const w = devicesWorld(() => ({ valid: false, output: `config:1: ${IMG}\nconfig:99: ${SVG}` }), null, HOSTILE_DEVICES);
	const v = w.load('view.hydradns.devices');
	const page = v.render(await v.load());
	shownAsText(byId(page, 'hydradns-devices'), [ IMG, QUOTES, AMP, '__proto__', 'default, __proto__' ], 'the devices');
	const link = find(page, (n) => n.tag === 'a' && n.attrs['data-device'] === '192.0.2.50')[0];
	assert.equal(text(link), IMG, 'the name links to the device\'s page');
	await find(page, (n) => n.attrs['data-add'] === '02:00:5e:10:00:01')[0].attrs.click();
	shownAsText(w.ui.modal.head, [ `Add ${IMG} to a group` ], 'the dialog\'s title');
	shownAsText(w.ui.modal.node, [ 'Its groups now: default, __proto__.' ], 'the dialog');
	assert.deepEqual(find(byId(w.ui.modal.node, 'hydradns-add-group'), (n) => n.tag === 'option').map(text), [ 'kids' ]);
	assert.equal(await byId(w.ui.modal.node, 'hydradns-add-group-ok').attrs.click(), false, 'refused by check-config');
	shownAsText(w.notes.pop().body, [ IMG, SVG ], 'check-config\'s refusal');
	await v.handleAsk(HOSTILE_DEVICES.devices[2]);
	shownAsText(w.notes.pop().body, [ '__proto__ is in every group already.' ], 'nothing to add');
});

test('issue 58: the device\'s own page shows its name, rule, groups and schedules as text', async () => {
	const st = fixture('status.json');
	st.stats.groups.push({ name: '__proto__', blocked: 0, schedule: IMG, active: false, paused_until: 0 });
	const w = world({
		'luci.hydradns.top': () => ({ schema: 1, entries: [] }),
		'luci.hydradns.log': () => ({ schema: 1, entries: [] }),
		'luci.hydradns.devices': () => HOSTILE_DEVICES,
		'luci.hydradns.status': () => st
	});
	w.window.location = { search: '?client=192.0.2.50' };
	const v = w.load('view.hydradns.queries');
	const box = byId(v.render(await v.load()), 'hydradns-device');
	shownAsText(box, [ `Device: ${IMG}`, `config client "${SVG}"` ], 'the device');
	const rows = find(byId(box, 'hydradns-device-groups'), (n) => n.tag === 'tr').slice(1).map((r) => r.children.map(text));
	assert.deepEqual(rows.map((r) => r.slice(0, 2)), [ [ 'default', 'always' ], [ '__proto__', `${IMG} (inactive now: its lists do not apply)` ] ]);
	// By name, as typed in the filter: the same device.
	w.window.location = { search: '?client=' + encodeURIComponent(QUOTES) };
	shownAsText(byId(v.render(await v.load()), 'hydradns-device'), [ `Device: ${QUOTES}`, AMP ], 'found by its name');
});

test('issue 58: check-config\'s refusal on Save & Apply is shown as text', async () => {
	const w = world({ 'luci.hydradns.check_config': () => ({ valid: false, output: `config:1: ${IMG}\n${SVG}` }) }, {
		hydradns: [ { '.type': 'group', '.name': 'kids', '.anonymous': false } ]
	});
	const api = w.load('hydradns.api');
	assert.equal(await api.saveApply({ handleSave: () => Promise.resolve() }, null, '0'), false);
	const note = w.notes.pop();
	assert.equal(note.title, 'HydraDNS refuses this configuration');
	shownAsText(note.body, [ `: ${IMG}`, SVG, 'Section kids' ], 'the refusal');
});

test('issue 58: the harness takes a bare string child for markup, as LuCI does; api.E makes it text', () => {
	const td = E('td', {}, IMG);
	assert.deepEqual(find(td, (n) => n.parsed).map((n) => n.tag), [ 'img' ], 'LuCI\'s E: parsed');
	assert.deepEqual(takeViolations().map((v) => v.html), [ IMG ], 'and counted against the test');
	assert.equal(text(E('td', {}, [ IMG ])), IMG, 'an array of strings: text');
	const api = world({}).load('hydradns.api');
	for (const node of [ api.E('td', {}, IMG), api.E('td', IMG), api.E('td', {}, [ 'a', [ QUOTES, 5 ] ]), api.E([], [ AMP ]) ])
		assert.deepEqual(find(node, (n) => n.parsed), []);
	assert.equal(text(api.E('td', {}, [ 'a', [ QUOTES, 5 ] ])), `a${QUOTES}5`);
	assert.equal(text(api.E('p', E('b', {}, [ IMG ]))), IMG, 'a node where attributes go is a child');
});

test('issue 58: every view makes its nodes with api.E', () => {
	const dir = path.join(APP, 'htdocs/luci-static/resources/view');
	for (const f of fs.readdirSync(dir, { recursive: true }).filter((f) => f.endsWith('.js'))) {
		const src = fs.readFileSync(path.join(dir, f), 'utf8');
		assert.match(src, /^var E = api\.E;$/m, `${f}: builds with LuCI's E, which makes a string child markup`);
		assert.doesNotMatch(src, /innerHTML|ui\.showModal|ui\.addNotification|L\.tooltip/, `${f}: a way to markup around api.E`);
	}
});

// Issue 60: a group's upstreams (free form, or a family resolver's preset),
// its fallback, and the exceptions with an end (`hydradns exceptions`,
// `allow|block --for`), on the group's page, the device's, the Overview
// and from Queries' Allow and Block.
const NOW = () => Math.floor(Date.now() / 1000);
// The router an hour east of UTC (system.info's localtime).
const routerInfo = () => ({ localtime: NOW() + 3600, uptime: 99 });
const hm = (t) => new Date((t + 3600) * 1000).toISOString().substr(11, 5);

function exceptionsFixture(now) {
	return [
		{ action: 'block', group: 'kids', client: null, service: null, name: 'game.example', ends: now + 7230 },
		{ action: 'allow', group: 'kids', client: null, service: 'youtube', name: null, ends: now + 3630 },
		{ action: 'allow', group: 'guests', client: null, service: null, name: 'ads.example', ends: now + 600 },
		{ action: 'block', group: null, client: '02:00:5E:10:00:01', service: null, name: 'video.example', ends: now + 1830 },
		{ action: 'allow', group: null, client: 'kids-tablet', service: null, name: 'school.example', ends: now + 900 },
		{ action: 'allow', group: null, client: '192.0.2.9', service: null, name: 'other.example', ends: now + 900 },
		// Its end has passed since the list was read.
		{ action: 'allow', group: 'kids', client: null, service: null, name: 'gone.example', ends: now - 5 }
	];
}

// The plugin's allow_for and block_for as the CLI would answer: the list
// after the change (an exception ended with duration 0, others added).
function timedReplies(list, calls) {
	const reply = (action) => (a) => {
		calls.push(Object.assign({ action }, a));
		const same = (e) => e.action === action && e.name === (a.name || null) && e.service === (a.service || null) &&
			(a.client ? e.client === a.client : e.group === (a.group || null));
		if (a.duration === '0') {
			const i = list.findIndex(same);
			if (i >= 0) list.splice(i, 1);
		}
		else {
			const groups = a.client ? [ null ] : a.group ? [ a.group ] : [ 'default', 'kids' ];
			const secs = a.duration === '1h' ? 3600 : 30000;
			for (const g of groups)
				list.push({ action, group: a.client ? null : g, client: a.client || null, service: a.service || null, name: a.name || null, ends: NOW() + secs });
		}
		return { schema: 1, exceptions: list.slice() };
	};
	return { 'luci.hydradns.allow_for': reply('allow'), 'luci.hydradns.block_for': reply('block'),
		'luci.hydradns.exceptions': () => ({ schema: 1, exceptions: list.slice() }) };
}

test('issue 60: a group chooses its upstreams, free form or a family resolver\'s preset, and whether to fall back to the main ones', async () => {
	const w = world({ 'luci.hydradns.services': () => ({ schema: 1, services: [] }) },
		{ hydradns: [ { '.type': 'group', '.name': 'kids', '.anonymous': false } ] });
	const v = w.load('view.hydradns.settings');
	await v.render(await v.load());
	const g = w.form.maps[0].sections.find((s) => s.type === 'group');
	const opt = (name) => g.options.find((o) => o.name === name);
	const names = g.options.map((o) => o.name);
	assert.ok(names.indexOf('upstream') < names.indexOf('_preset') && names.indexOf('_preset') < names.indexOf('fallback_main'),
		'the presets beside the list they fill');
	const up = opt('upstream');
	assert.equal(up.cls, 'DynamicList');
	assert.match(up.description, /Empty: the main upstreams/);
	const fb = opt('fallback_main');
	assert.deepEqual([ fb.cls, fb.default, fb.rmempty ], [ 'Flag', '0', false ], 'off unless asked, as the daemon reads its absence');
	assert.match(fb.description, /never an answer from resolvers the group avoids/);

	// The shapes the parser takes (src/config/upstream.rs), checked in the browser.
	for (const good of [ '', '192.0.2.53', '192.0.2.53:5353', '[2001:db8::53]:53', '2001:db8::53', 'tls://dns.quad9.net',
		'tls://dns.example:8853#192.0.2.1,[2001:db8::1]', 'tls://1.1.1.1', 'tls://[2606:4700::1111]:853', 'https://dns.google/dns-query',
		'https://cloudflare-dns.com#1.1.1.1', 'https://dns.example:8443/q#192.0.2.1', ' 192.0.2.53 ' ])
		assert.equal(up.validate('kids', good), true, good);
	for (const bad of [ 'dns.google', '192.0.2.53:0', '192.0.2.53:65536', '256.0.0.1', 'tls://', 'tls://dns example', 'tls://dns..example',
		'tls://dns.example#', 'tls://dns.example#not-an-ip', 'tls://dns.example/path', 'quic://dns.example', 'https://dns.example:0/q',
		'192.0.2.53; reboot', '192.0.2.53 192.0.2.54' ])
		assert.match(up.validate('kids', bad), /IP\[:PORT\], tls:\/\/NAME/, bad);

	// The presets: each operator's published addresses and names.
	const preset = opt('_preset');
	assert.equal(preset.cls, 'CBI.HydraDNSUpstreamPresets');
	const widget = preset.renderWidget('kids');
	const select = byId(widget, 'hydradns-preset-kids');
	const offered = find(select, (n) => n.tag === 'option').slice(1).map((o) => [ o.attrs.value, o.attrs.title ]);
	assert.deepEqual(offered, [
		[ 'cloudflare-family', '1.1.1.3 1.0.0.3' ],
		[ 'cloudflare-family-tls', 'tls://family.cloudflare-dns.com#1.1.1.3,1.0.0.3' ],
		[ 'cloudflare-family-https', 'https://family.cloudflare-dns.com/dns-query#1.1.1.3,1.0.0.3' ],
		[ 'adguard-family', '94.140.14.15 94.140.15.16' ],
		[ 'adguard-family-tls', 'tls://family.adguard-dns.com#94.140.14.15,94.140.15.16' ],
		[ 'adguard-family-https', 'https://family.adguard-dns.com/dns-query#94.140.14.15,94.140.15.16' ],
		[ 'cleanbrowsing-family', '185.228.168.168 185.228.169.168' ],
		[ 'cleanbrowsing-family-tls', 'tls://family-filter-dns.cleanbrowsing.org' ],
		[ 'cleanbrowsing-family-https', 'https://doh.cleanbrowsing.org/doh/family-filter/' ]
	]);
	for (const [ , list ] of offered)
		for (const u of list.split(' '))
			assert.equal(up.validate('kids', u), true, `the preset ${u} passes the page's own check`);
	// "Use" puts the preset in the group's Upstreams list (LuCI's widget), replacing it.
	const set = [];
	preset.section = { getUIElement: (sid, name) => (sid === 'kids' && name === 'upstream' ? { setValue: (v) => set.push([ ...v ]) } : null) };
	const use = find(widget, (n) => n.attrs['data-preset-for'] === 'kids')[0];
	select.value = 'cloudflare-family-tls';
	await use.attrs.click();
	select.value = 'adguard-family';
	await use.attrs.click();
	select.value = '';
	await use.attrs.click();
	assert.deepEqual(set, [ [ 'tls://family.cloudflare-dns.com#1.1.1.3,1.0.0.3' ], [ '94.140.14.15', '94.140.15.16' ] ],
		'each preset replaces the list; no choice, no change');
});

test('issue 60: a group\'s page lists its exceptions with their ends on the router\'s clock; End ends one', async () => {
	const list = exceptionsFixture(NOW()), calls = [];
	const w = world(Object.assign({ 'luci.hydradns.services': () => ({ schema: 1, services: [] }), 'system.info': routerInfo },
		timedReplies(list, calls)), { hydradns: [ { '.type': 'group', '.name': 'kids', '.anonymous': false } ] });
	const v = w.load('view.hydradns.settings');
	await v.render(await v.load());
	const opt = w.form.maps[0].sections.find((s) => s.type === 'group').options.find((o) => o.name === '_exceptions');
	assert.equal(opt.cls, 'CBI.HydraDNSExceptions');
	const box = opt.renderWidget('kids');
	assert.equal(box.attrs.id, 'hydradns-exceptions-kids');
	const rows = () => find(box, (n) => n.tag === 'tr').slice(1).map((r) => r.children.slice(0, 4).map(text));
	const kids = list.filter((e) => e.group === 'kids');
	assert.deepEqual(rows(), [
		[ 'allowed', 'group kids', 'service youtube', `${hm(kids[1].ends)} (1h 0m left)` ],
		[ 'blocked', 'group kids', 'game.example', `${hm(kids[0].ends)} (2h 0m left)` ]
	], 'the group\'s own, soonest end first; one whose end has passed is left out');
	await find(box, (n) => n.attrs['data-end'] === 'allow group kids service youtube')[0].attrs.click();
	assert.deepEqual(calls.pop(), { action: 'allow', group: 'kids', client: '', service: 'youtube', name: '', duration: '0' });
	assert.deepEqual(rows().map((r) => r[2]), [ 'game.example' ], 'the list as the reply has it');
	assert.deepEqual(rows().length, 1);

	// A read-only login sees them, without End; a gateway that cannot say, says so.
	w.L.env.readonly = true;
	assert.equal(find(opt.renderWidget('kids'), (n) => n.tag === 'button').length, 0);
	w.L.env.readonly = false;
	opt.list = null;
	assert.match(text(opt.renderWidget('kids')), /cannot be read/);
});

test('issue 60: Queries\' Allow and Block: always (the lists), for 1 hour or until tomorrow (an exception), each with its way back', async () => {
	const list = [], calls = [];
	const w = world(Object.assign({
		'luci.hydradns.top': () => ({ schema: 1, entries: [ { key: 'ads.example', count: 3 } ] }),
		'luci.hydradns.log': () => fixture('log.json'),
		'luci.hydradns.allow': (a) => ({ allowlist: a.domain, groups: 'default', undo: 'luci_allow_default:0 luci_block_default:0' }),
		'system.info': routerInfo
	}, timedReplies(list, calls)));
	const v = w.load('view.hydradns.queries');
	const page = v.render(await v.load());
	const rows = find(byId(page, 'hydradns-log'), (n) => n.tag === 'tr').slice(1);
	const blockedRow = rows[fixture('log.json').entries.findIndex((e) => e.outcome === 'blocked')];
	const ask = async (row) => {
		await find(row, (n) => n.attrs['data-name'])[0].attrs.click();
		return byId(w.ui.modal.node, 'hydradns-decide-for');
	};

	// For 1 hour, for this device: `allow --client 127.0.0.1 --for 1h ads.example`.
	let howLong = await ask(blockedRow);
	assert.deepEqual(find(howLong, (n) => n.tag === 'option').map((o) => [ o.attrs.value, text(o) ]),
		[ [ 'always', 'always' ], [ '1h', 'for 1 hour' ], [ 'tomorrow', 'until tomorrow (midnight)' ] ]);
	assert.equal(text(byId(w.ui.modal.node, 'hydradns-decide-device')), 'For this device\'s groups');
	howLong.value = '1h';
	howLong.listeners.change();
	assert.equal(text(byId(w.ui.modal.node, 'hydradns-decide-device')), 'For this device', 'for a while: the device alone');
	await byId(w.ui.modal.node, 'hydradns-decide-device').attrs.click();
	assert.deepEqual(calls.pop(), { action: 'allow', group: '', client: '127.0.0.1', service: '', name: 'ads.example', duration: '1h' });
	assert.ok(!w.calls.some((c) => c.method === 'allow'), 'no list changed');
	let note = w.notes.pop();
	assert.match(note.text, /^ads\.example is allowed for 127\.0\.0\.1 until (\d\d:\d\d) \(1h 0m left\)\. End now$/);
	// An end on another day than the router's today has its date too (a run near midnight).
	assert.equal(/until (?:\d{4}-\d\d-\d\d )?(\d\d:\d\d)/.exec(note.text)[1], hm(list[0].ends), 'on the router\'s clock');
	await byId(note.body, 'hydradns-end').attrs.click();
	assert.deepEqual(calls.pop(), { action: 'allow', group: '', client: '127.0.0.1', service: '', name: 'ads.example', duration: '0' });
	assert.match(w.notes.pop().text, /ads\.example: the exception has ended/);
	assert.deepEqual(list, []);

	// Until tomorrow, for every group (no device: the top blocked names).
	const forwardedRow = rows[fixture('log.json').entries.findIndex((e) => e.outcome !== 'blocked')];
	const name = find(forwardedRow, (n) => n.attrs['data-name'])[0].attrs['data-name'];
	howLong = await ask(forwardedRow);
	howLong.value = 'tomorrow';
	await byId(w.ui.modal.node, 'hydradns-decide-all').attrs.click();
	assert.deepEqual(calls.pop(), { action: 'block', group: '', client: '', service: '', name, duration: 'tomorrow' },
		'the plugin works out the router\'s midnight');
	note = w.notes.pop();
	assert.match(note.text, new RegExp(`^${name.replace(/\./g, '\\.')} is blocked for every group until (\\d{4}-\\d\\d-\\d\\d )?\\d\\d:\\d\\d \\(8h 20m left\\)\\.`));
	await byId(note.body, 'hydradns-end').attrs.click();
	assert.deepEqual(calls.splice(0).map((c) => [ c.action, c.group, c.duration ]), [ [ 'block', 'default', '0' ], [ 'block', 'kids', '0' ] ],
		'End now ends the exception of each group');
	assert.deepEqual(list, []);

	// Always: today's lists, untouched by this.
	howLong = await ask(blockedRow);
	await byId(w.ui.modal.node, 'hydradns-decide-device').attrs.click();
	assert.deepEqual(w.calls.filter((c) => c.method === 'allow').pop().args, { domain: 'ads.example', client: '127.0.0.1' });
	assert.deepEqual(calls, []);
	assert.ok(byId(w.notes.pop().body, 'hydradns-undo'));
});

test('issue 60: a device\'s page lists the exceptions made for it, by its address, MAC or name, with End', async () => {
	const list = exceptionsFixture(NOW()), calls = [];
	const w = world(Object.assign({
		'luci.hydradns.top': () => ({ schema: 1, entries: [] }),
		'luci.hydradns.log': () => ({ schema: 1, entries: [] }),
		'luci.hydradns.devices': () => DEVICES,
		'luci.hydradns.status': () => fixture('status.json'),
		'system.info': routerInfo
	}, timedReplies(list, calls)));
	w.window.location = { search: '?client=192.0.2.50' };
	const v = w.load('view.hydradns.queries');
	const box = byId(v.render(await v.load()), 'hydradns-device-exceptions');
	const covers = () => find(box, (n) => n.tag === 'tr').slice(1).map((r) => [ text(r.children[1]), text(r.children[2]) ]);
	assert.deepEqual(covers(), [ [ 'device kids-tablet', 'school.example' ], [ 'device 02:00:5E:10:00:01', 'video.example' ] ],
		'by name and by MAC (any case); another device\'s not');
	await find(box, (n) => n.attrs['data-end'] === 'block client 02:00:5E:10:00:01 name video.example')[0].attrs.click();
	assert.deepEqual(calls.pop(), { action: 'block', group: '', client: '02:00:5E:10:00:01', service: '', name: 'video.example', duration: '0' },
		'ended for the client as it was given');
	assert.deepEqual(covers(), [ [ 'device kids-tablet', 'school.example' ] ]);
});

test('issue 60: the Overview lists every exception in force with its end; End; none for a read-only login', async () => {
	const list = exceptionsFixture(NOW()), calls = [];
	const w = statusWorld(Object.assign(fixture('status.json'), { now: NOW() }), Object.assign({ 'system.info': routerInfo }, timedReplies(list, calls)));
	const v = w.load('view.hydradns.status');
	const page = v.render(await v.load());
	const table = () => byId(v.box, 'hydradns-exceptions-table');
	const rows = () => find(table(), (n) => n.tag === 'tr').slice(1).map((r) => r.children.slice(0, 3).map(text));
	assert.equal(rows().length, 6, 'all but the one whose end has passed');
	assert.deepEqual(rows()[0], [ 'allowed', 'group guests', 'ads.example' ], 'soonest end first');
	assert.match(text(find(table(), (n) => n.attrs.class === 'hydradns-exception-ends')[0]), /^\d\d:\d\d \(10m 0s left\)$/);
	assert.ok(page);
	await find(table(), (n) => n.attrs['data-end'] === 'allow group guests name ads.example')[0].attrs.click();
	assert.deepEqual(calls.pop(), { action: 'allow', group: 'guests', client: '', service: '', name: 'ads.example', duration: '0' });
	assert.equal(rows().length, 5);
	w.L.env.readonly = true;
	v.fill(v.st);
	assert.equal(find(table(), (n) => n.tag === 'button').length, 0);
});

test('issue 60: exceptions, presets and the new dialogs show what comes from outside as text', async () => {
	const now = NOW();
	const list = [
		{ action: 'allow', group: IMG, client: null, service: SVG, name: null, ends: now + 60 },
		{ action: 'block', group: 'kids', client: null, service: null, name: QUOTES, ends: now + 60 },
		{ action: 'block', group: null, client: AMP, service: null, name: IMG, ends: now + 60 }
	];
	const calls = [];
	const w = statusWorld(Object.assign(fixture('status.json'), { now }), Object.assign({ 'luci.hydradns.services': () => ({ schema: 1, services: [] }) },
		timedReplies(list, calls), { 'luci.hydradns.allow_for': () => { throw new Error(SVG); } }));
	const v = w.load('view.hydradns.status');
	v.render(await v.load());
	shownAsText(byId(v.box, 'hydradns-exceptions'), [ `group ${IMG}`, `service ${SVG}`, QUOTES, `device ${AMP}`, IMG ], 'the Overview');
	await find(v.box, (n) => (n.attrs['data-end'] || '').startsWith('allow group'))[0].attrs.click();
	shownAsText(w.notes.pop().body, [ `Cannot end the exception: ${SVG}` ], 'a refusal');

	w.uci.data.hydradns = [ { '.type': 'group', '.name': 'kids', '.anonymous': false } ];
	const s = w.load('view.hydradns.settings');
	await s.render(await s.load());
	const opts = w.form.maps[0].sections.find((x) => x.type === 'group').options;
	shownAsText(opts.find((o) => o.name === '_exceptions').renderWidget('kids'), [ QUOTES ], 'the group\'s exceptions');
	shownAsText(opts.find((o) => o.name === '_preset').renderWidget(IMG), [ 'Cloudflare for Families' ], 'the presets');

	// Queries: a refused timed allow, and a name holding markup in the note.
	const q = world(Object.assign({
		'luci.hydradns.top': () => ({ schema: 1, entries: [ { key: SVG, count: 1 } ] }),
		'luci.hydradns.log': () => ({ schema: 1, entries: [] })
	}, timedReplies([], calls), { 'luci.hydradns.allow_for': () => { throw new Error(IMG); } }));
	const qv = q.load('view.hydradns.queries');
	const page = qv.render(await qv.load());
	await find(byId(page, 'hydradns-top-blocked'), (n) => n.tag === 'button')[0].attrs.click();
	byId(q.ui.modal.node, 'hydradns-decide-for').value = '1h';
	await byId(q.ui.modal.node, 'hydradns-decide-all').attrs.click();
	shownAsText(q.notes.pop().body, [ IMG ], 'the refusal');
	await qv.handleTimed('block', SVG, QUOTES, '1h');
	shownAsText(q.notes.pop().body, [ `${SVG} is blocked for ${QUOTES} until` ], 'the note');
});
