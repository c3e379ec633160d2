// Loads luci-app-hydradns's JS as LuCI's loader does (the `'require X as Y'`
// directives become the factory's arguments; see luci.js require()), inside
// node:vm with small stand-ins for LuCI's classes that record what the
// views ask of them. Used by views.test.js; no npm packages.
'use strict';
const fs = require('fs');
const path = require('path');
const vm = require('vm');

const APP = path.join(__dirname, '../../openwrt/luci-app-hydradns');
const RESOURCES = path.join(APP, 'htdocs/luci-static/resources');

// LuCI's String.prototype.format, the conversions the views use: %s %d
// %.Nf %% and %h (HTML-escaped, as cbi.js's html_esc).
function format(fmt, ...args) {
	let i = 0;
	return fmt.replace(/%(%|\.(\d+)f|[sdfh])/g, (m, conv, prec) => {
		if (conv === '%') return '%';
		const v = args[i++];
		if (conv === 's') return String(v);
		if (conv === 'h') return escape(v);
		if (conv === 'd') return String(Math.trunc(Number(v)));
		return Number(v).toFixed(prec != null ? +prec : 6);
	});
}
function escape(v) {
	return String(v).replace(/&/g, '&#38;').replace(/"/g, '&#34;').replace(/'/g, '&#39;').replace(/</g, '&#60;').replace(/>/g, '&#62;');
}

// Every value that reached innerHTML and was not a constant (a string
// `_()` returned as it is): a test that leaves one here fails
// (views.test.js's afterEach). LuCI's dom.append sets innerHTML from a
// child that is neither a node, an array, a function nor null: a bare
// string given to E(), dom.content or dom.append, a modal's or a
// notification's title.
const msgids = new Set();
const violations = [];
function takeViolations() { return violations.splice(0); }

// DOM nodes as plain objects: tag, attrs, children (nodes, and strings for
// text nodes). A node whose innerHTML was set holds what a browser would
// have parsed: its text (entities decoded) and, for each tag, a node
// marked `parsed` (an <img onerror> becomes such a node: the tests look
// for them).
class Node {
	constructor(tag, attrs) {
		this.tag = tag;
		this.attrs = attrs || {};
		this.children = [];
		this.style = {};
	}
	appendChild(c) { this.children.push(c); return c; }
	addEventListener(type, fn) { (this.listeners ||= {})[type] = fn; }
	get innerHTML() { return this.html; }
	set innerHTML(v) { setHtml(this, v, new Error().stack); }
}
const isNode = (n) => n instanceof Node;

function setHtml(node, value, where) {
	value = String(value);
	if (!msgids.has(value))
		violations.push({ tag: node.tag, id: node.attrs.id, html: value, where: String(where || new Error().stack).split('\n').slice(2, 6).join('\n') });
	node.html = value;
	node.children = parseHtml(value);
}

const ENTITIES = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: '\u00a0' };
function decode(s) {
	return s.replace(/&(#x[0-9a-f]+|#\d+|[a-z]+);/gi, (m, e) => e[0] !== '#' ? (ENTITIES[e.toLowerCase()] ?? m)
		: String.fromCodePoint(e[1] === 'x' || e[1] === 'X' ? parseInt(e.slice(2), 16) : +e.slice(1)));
}
function parseHtml(html) {
	return html.split(/(<[^>]*>)/).filter((p) => p !== '').flatMap((p) => {
		const m = /^<\s*([a-zA-Z][\w-]*)/.exec(p);
		if (m) {
			const n = new Node(m[1].toLowerCase(), { raw: p });
			n.parsed = true;
			return [ n ];
		}
		return p[0] === '<' ? [] : [ decode(p) ];
	});
}

// dom.append(node, children) as luci.js has it.
function append(node, children) {
	if (Array.isArray(children)) {
		for (const c of children) {
			if (isNode(c)) node.appendChild(c);
			else if (c != null) node.appendChild(String(c));
		}
	}
	else if (typeof children === 'function')
		append(node, children(node));
	else if (isNode(children))
		node.appendChild(children);
	else if (children != null)
		setHtml(node, children);
}

// E() as luci.js's dom.create: E(tag, attrs, children) or E(tag, children),
// E([...], children) a fragment.
function E(tag, attrs, children) {
	if (isNode(attrs))
		throw new Error(`E('${tag}', node): LuCI takes a node there for attributes`);
	if (attrs == null || typeof attrs !== 'object' || Array.isArray(attrs))
		[ attrs, children ] = [ {}, attrs ];
	const node = new Node(Array.isArray(tag) ? '#fragment' : tag, Object.assign({}, attrs));
	append(node, children);
	return node;
}
function text(n) {
	if (n == null) return '';
	if (typeof n !== 'object') return String(n);
	return n.children.map(text).join('');
}
function find(n, pred, out = []) {
	if (n && typeof n === 'object') {
		if (pred(n)) out.push(n);
		(n.children || []).forEach((c) => find(c, pred, out));
	}
	return out;
}
const byId = (n, id) => find(n, (x) => x.attrs && x.attrs.id === id)[0];

function classOf(proto) {
	const C = function () {};
	C.prototype = proto;
	C.extend = (p) => classOf(Object.assign(Object.create(proto), p));
	return C;
}

// A fresh world: `replies` maps "object.method" to a function of the call's
// named arguments returning the reply (or throwing); `uciData` is UCI's
// view, config → sections; `hosts` the [MAC, name] pairs LuCI's host hints
// know (network.getHostHints()).
function world(replies, uciData, hosts) {
	const calls = [], notes = [], polls = [], applied = [];
	const rpc = {
		declare(d) {
			return (...args) => {
				const named = {};
				(d.params || []).forEach((p, i) => { named[p] = args[i]; });
				calls.push({ object: d.object, method: d.method, args: named });
				const f = replies[d.object + '.' + d.method];
				if (!f) return Promise.reject(new Error('no reply for ' + d.method));
				try { return Promise.resolve(f(named)); } catch (e) { return Promise.reject(e); }
			};
		}
	};
	const uci = {
		data: uciData || {},
		saved: 0,
		load() { return Promise.resolve(); },
		sections(conf, type) {
			return (this.data[conf] || []).filter((s) => !type || s['.type'] === type);
		},
		get(conf, sid, opt) {
			const s = (this.data[conf] || []).find((x) => x['.name'] === sid);
			return s && opt != null ? s[opt] : s;
		},
		// What the session has staged, config → [op, section, …] (rpcd's uci changes).
		staged: {},
		changes() { return Promise.resolve(this.staged); },
		// Local edits (uci.js keeps them until save()): made on `data`,
		// each recorded; unload() drops them as uci.js does.
		edits: [],
		saves: 0,
		unloads: 0,
		add(conf, type) {
			const sid = 'new' + this.edits.length;
			(this.data[conf] ||= []).push({ '.type': type, '.name': sid, '.anonymous': true });
			this.edits.push([ 'add', conf, type, sid ]);
			return sid;
		},
		set(conf, sid, opt, val) {
			this.get(conf, sid)[opt] = val;
			this.edits.push([ 'set', conf, sid, opt, val ]);
		},
		save() { this.saves++; return Promise.resolve(); },
		unload() { this.unloads++; }
	};
	const ui = {
		createHandlerFn(ctx, fn, ...args) {
			return () => (typeof fn === 'string' ? ctx[fn] : fn).apply(ctx, args);
		},
		// As ui.js: the title an <h4> made with E(), the body appended.
		addNotification(title, body, kind) {
			const head = title != null ? E('h4', {}, title) : null, node = E('div', {});
			append(node, body);
			notes.push({ title: head && text(head), head, text: text(node), kind, body: node });
		},
		// The last modal shown: { title, head, node }, null once hidden.
		modal: null,
		showModal(title, children) {
			const head = E('h4', {}, title), node = E('div', {});
			append(node, children);
			ui.modal = { title: text(head), head, node };
		},
		hideModal() { ui.modal = null; },
		changes: { apply(checked) { applied.push(checked); } }
	};
	const dom = {
		elem: isNode,
		create: E,
		append,
		content(node, children) { node.children = []; delete node.html; append(node, children); return node; }
	};
	const network = {
		getHostHints() { return Promise.resolve({ getMACHints: () => (hosts || []).slice() }); }
	};
	const poll = { add(fn, interval) { polls.push({ fn, interval }); } };
	const form = makeForm(uci);
	const L = {
		url: (...parts) => '/cgi-bin/luci/' + parts.join('/'),
		bind: (fn, ctx, ...a) => fn.bind(ctx, ...a),
		resolveDefault: (p, d) => Promise.resolve(p).catch(() => d),
		isObject: (o) => o != null && typeof o === 'object',
		toArray: (v) => (v == null ? [] : Array.isArray(v) ? v : String(v).split(/\s+/).filter(Boolean)),
		// The menu entry's ACL: a test sets env.readonly for a read-only login.
		hasViewPermission() { return !this.env.readonly; },
		env: {}
	};
	const ctx = vm.createContext({ console, E, _: (s) => { msgids.add(s); return s; }, URLSearchParams, encodeURIComponent });
	// The page's window: a test sets window.location to open a page with a query string.
	const win = {};
	vm.runInContext('String.prototype.format = function(...a) { return __format(String(this), ...a); }',
		Object.assign(ctx, { __format: format }));
	const mocks = {
		baseclass: { extend: (p) => classOf(p) },
		view: { extend: (p) => classOf(p) },
		rpc, uci, ui, dom, poll, form, network,
		'tools.widgets': { ZoneSelect: 'ZoneSelect' }
	};
	const loaded = {};
	function load(name) {
		if (loaded[name]) return loaded[name];
		const file = path.join(RESOURCES, name.replace(/\./g, '/') + '.js');
		const src = fs.readFileSync(file, 'utf8');
		const names = [], deps = [];
		for (const m of src.matchAll(/^'require ([\w.]+)(?: as (\w+))?';$/gm)) {
			names.push(m[2] || m[1].replace(/[^a-zA-Z0-9_]/g, '_'));
			deps.push(mocks[m[1]] || load(m[1]));
		}
		const factory = vm.runInContext(`(function(window, document, L, ${names.join(', ')}) { ${src} })`, ctx, { filename: file });
		const Class = factory(win, {}, L, ...deps);
		loaded[name] = new Class();
		return loaded[name];
	}
	return { load, calls, notes, polls, applied, uci, form, L, window: win, ui };
}

// form.Map and friends: records the sections and options a view declares.
// An option reads UCI and shows itself in a grid as form.js's do.
function makeForm(uci) {
	const maps = [];
	const Option = {
		cfgvalue(sid) { return uci.get(this.config, sid, this.name); },
		// form.AbstractValue's: the value as markup, escaped (%h).
		textvalue(sid) {
			let v = this.cfgvalue(sid);
			if (v == null) v = this.default;
			if (Array.isArray(v)) v = v.join(' ');
			return v != null ? format('%h', v) : null;
		},
		// GridSection's cell for it (form.js renderTextValue): the
		// textvalue is the cell's innerHTML, markup by contract, so not
		// counted against the views; the tests read what it shows.
		gridCell(sid) {
			const v = this.textvalue(sid), td = E('td', { 'data-name': this.name });
			if (v == null) append(td, E('em', {}, [ 'none' ]));
			else { td.html = String(v); td.children = parseHtml(td.html); }
			return td;
		}
	};
	function Section(map, kind, type, title) {
		this.kind = kind; this.type = type; this.title = title; this.options = []; this.tabs = [];
		this.tab = (name, title) => { this.tabs.push({ name, title }); };
		this.option = (cls, name, title, description) => {
			const o = Object.assign(Object.create(typeof cls === 'object' ? cls : Option), { cls: typeof cls === 'object' ? cls.__name__ : cls, config: map.config, name, title, description, values: [],
				value(v, label) { this.values.push(v); (this.keylist ||= []).push(String(v)); (this.labels ||= {})[v] = label; },
				load() { return Promise.resolve(); },
				depends(k, v) { (this.deps ||= []).push([ k, v ]); } });
			this.options.push(o);
			return o;
		};
		this.taboption = (tab, cls, name, title, description) => Object.assign(this.option(cls, name, title, description), { tab });
	}
	function Map(config, title, descr) {
		this.config = config; this.title = title; this.sections = []; maps.push(this);
	}
	Map.prototype.section = function (kind, type, title) { const s = new Section(this, kind, type, title); this.sections.push(s); return s; };
	Map.prototype.render = function () { return Promise.resolve(E('div', { 'class': 'cbi-map' }, this.title)); };
	const form = { Map, maps };
	for (const k of [ 'TypedSection', 'NamedSection', 'GridSection', 'Flag', 'Value', 'ListValue', 'DynamicList' ])
		form[k] = k;
	// A class a view extends: its methods end up on the options made of it.
	const extendable = (name) => Object.assign(Object.create(Option), { __name__: name, extend(p) { return Object.assign(Object.create(this), p); } });
	form.MultiValue = extendable('MultiValue');
	form.DummyValue = extendable('DummyValue');
	return form;
}

module.exports = { world, text, find, byId, format, escape, takeViolations, E, APP };
