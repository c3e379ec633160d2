'use strict';
'require view';
'require form';
'require uci';
'require ui';
'require hydradns.api as api';

// LuCI's E() makes a bare string child markup; api.E makes every child
// text, as what this page shows comes from outside (api.js).
var E = api.E;

// Lists: the block and allow lists (downloaded or local files, or names
// typed in), which groups each applies to, and "Update now". Saved through
// UCI, checked by the daemon's check-config before they apply.

function groupChoices(o) {
	o.value('default', _('default (every device no client rule names)'));
	uci.sections('hydradns', 'group').forEach(function(g) { o.value(g['.name']); });
}

function listSection(m, type, title, descr, live) {
	var s = m.section(form.GridSection, type, title, descr);
	s.anonymous = true;
	s.addremove = true;
	s.sortable = true;
	s.nodescriptions = true;

	var o = s.option(form.Flag, 'enabled', _('Enabled'));
	o.default = '1';
	o.rmempty = false;
	o.editable = true;

	o = s.option(form.Value, 'name', _('Name'));
	o.placeholder = _('from the section or file name');

	o = s.option(form.Value, 'url', _('Download from'));
	o.datatype = 'string';
	o.placeholder = 'https://…';
	o.validate = function(id, v) {
		return !v || /^https?:\/\/\S+$/.test(v) ? true : _('an http:// or https:// address');
	};

	o = s.option(form.DynamicList, 'path', _('Files'));
	o.modalonly = true;

	o = s.option(form.DynamicList, 'domain', _('Names'));
	o.modalonly = true;

	o = s.option(form.MultiValue, 'group', _('Groups'));
	groupChoices(o);
	o.placeholder = 'default';
	o.optional = true;
	// A list without groups is the group default's, not nobody's: the grid
	// says so. LuCI's grid takes a textvalue as markup: escaped, as its own.
	o.textvalue = function(section_id) {
		return '%h'.format(L.toArray(this.cfgvalue(section_id)).join(' ') || 'default');
	};

	o = s.option(form.DummyValue, '_entries', _('Entries'));
	o.modalonly = false;
	o.cfgvalue = function(section_id) {
		var name = uci.get('hydradns', section_id, 'name') || section_id;
		var l = live.filter(function(l) { return l.name == name && l.kind == type; })[0];
		return l ? String(l.entries) : '–';
	};

	o = s.option(form.DummyValue, '_updated', _('Last update'));
	o.modalonly = false;
	o.cfgvalue = function(section_id) {
		var name = uci.get('hydradns', section_id, 'name') || section_id;
		var l = live.filter(function(l) { return l.name == name && l.kind == type; })[0];
		if (!l || !l.url)
			return '–';
		return l.last_error ? _('failed: %s').format(l.last_error) : (l.last_success || _('never'));
	};
	return s;
}

return view.extend({
	load: function() {
		return Promise.all([
			uci.load('hydradns'),
			api.status().catch(function() { return { lists: [] }; })
		]);
	},

	render: function(data) {
		var live = data[1].lists || [];
		var m = new form.Map('hydradns', _('HydraDNS: lists'),
			_('Block lists decide what is blocked; an allow list entry beats every block list. A list without groups applies to the group "default": every device that no client rule names.'));

		listSection(m, 'blocklist', _('Block lists'), null, live);
		listSection(m, 'allowlist', _('Allow lists'), null, live);

		return m.render().then(L.bind(function(node) {
			return E([], [
				node,
				!api.canWrite() ? '' : E('div', { 'class': 'cbi-section' }, [
					E('button', { 'class': 'cbi-button cbi-button-action', 'id': 'hydradns-update',
						'click': ui.createHandlerFn(this, 'handleUpdate') }, _('Update lists now')),
					' ', E('span', {}, _('Downloads every list now (through the gateway); the table shows the result once done.'))
				])
			]);
		}, this));
	},

	handleUpdate: function() {
		return api.update().then(function() {
			api.notify(null, E('p', {}, _('Downloading the lists; reload this page in a minute to see them.')), 'info');
		}, function(e) {
			api.notify(null, E('p', {}, _('Update failed: %s').format(e.message)), 'danger');
		});
	},

	handleSaveApply: function(ev, mode) {
		return api.saveApply(this, ev, mode, api.LISTS);
	}
});
