extends Node

# SolipsismClient joins a Solipsism node over WebSocket as a client world
# (docs/protocol.md): it holds a copy of the shared world, the objects it
# owns among them, and tells the node its own objects' changes once per
# tick. Add it to a scene, set url, and call connect_to_node() (or set
# autoconnect). Everything happens on the main thread, in _process: the
# signals fire there, and the methods are called from there.
#
# A world is objects: an id, the identifier of the world that owns it, and
# properties (JSON values: numbers arrive as floats, arrays as Array,
# objects as Dictionary). Only the owner changes an object; everyone else
# sees its changes.

signal connected()  # the node's metadata arrived: the link is up
signal disconnected(code, reason)  # the link went (it is dialled again)
signal object_added(id, properties)  # an object of another world appeared
signal object_changed(id, changed)  # changed: the properties that changed
signal object_removed(id)  # an object of another world went
signal refreshed()  # the node's whole world has arrived (after each connect)
signal refused(id, reason)  # the node refused a write of ours (property schemas): the object is put back to the node's values
signal message(from, type, data)  # an ephemeral message reached this world
# A scope of another world's object changed (docs/protocol.md, "Scopes"):
# change is {"reset": bool, "removed": [ids], "added": {id: fields},
# "modified": {id: the fields that changed}}.
signal scope_changed(id, scope, change)

const Scopes = preload("scopes.gd")

# The node's WebSocket endpoint.
export var url = "ws://127.0.0.1:8080/ws"
# More nodes (members of a mesh) to try, in turn, after an attempt at the
# previous one fails.
export(Array) var failover_urls = []
# The identifier's prefix: the world is "<prefix>-XXXXXXXX-XXXXXXXX".
export var prefix = "godot"
# How often owned objects' changes go out, in milliseconds.
export var tick_msec = 50
# Dial url in _ready.
export var autoconnect = false
# Dial again after a link goes, after this many milliseconds (doubling to
# 8 s while dialling fails).
export var reconnect_msec = 500
# The microseconds a frame may spend applying what arrived; the rest waits
# for the next frame, in order (0: no limit). A node's tick brings many
# objects' changes at once: spread, they do not stall one frame.
export var budget_usec = 3000

var identifier = ""
# id -> {"owner": String, "properties": Dictionary, "scopes": {name:
# {"ver": int, "elements": {element id: fields}}}}
var objects = {}
# The microseconds the last frame's _process took: reading and applying
# what arrived (the handlers of the signals it fired included) and sending.
var process_usec = 0

const _ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

var _ws = null
var _open = false  # the WebSocket is open
var _ready_up = false  # the node's metadata arrived
var _answer_name = "metadataChange"
var _tokens = {}  # resume tokens the node handed us
var _pending = {}  # id -> record waiting for the next tick (one per object)
var _order = []  # ids of _pending, in the order they changed
var _next_flush = 0
var _tick_scale = 1.0
var _want = false  # connect_to_node was called
var _redial_at = -1
var _backoff = 0
var _inbox = []  # arrays of records arrived and not applied yet, in order (null: a refresh answer ends)
var _inbox_at = 0  # the next record of _inbox[0]
var _stale = {}  # ids of others' objects kept over a broken link, not yet in the refresh answer
var _dial_urls = []  # where the next dials go, in turn (a draining node's first)
var _next_url = 0
var _moving = false  # a draining node sent us elsewhere: dial at once
var _node_id = ""  # the identifier of the node we are linked to
# The URL of the current (or last) link.
var current_url = ""
var _scope_writes = {}  # id -> scope -> {"added", "modified": {element: fields}, "removed": {element: true}} since the last tick
var _scope_order = []  # ids of _scope_writes, in the order they were written
var _gaps = {}  # buckets of objects whose scope deltas came with a gap, to ask for
var _repair = null  # {"buckets", "answering", "seen", "since"} while a request is out


func _init():
	randomize()


func _ready():
	_ensure_identifier()
	if autoconnect:
		connect_to_node()


# (Exported properties are set after _init: the identifier waits for them.)
func _ensure_identifier():
	if identifier == "":
		identifier = "%s-%s-%s" % [prefix, _rand(8), _rand(8)]


# connect_to_node dials the node (url, or the one given) and keeps dialling
# after the link goes, until close() is called.
func connect_to_node(to = ""):
	if to != "":
		url = to
	_dial_urls = []
	_next_url = 0
	_ensure_identifier()
	_want = true
	_dial()


# close ends the link for good: the node removes this world's objects.
func close():
	_want = false
	if _ws != null:
		_ws.disconnect_from_host(1000, "bye")
	_open = false
	_ready_up = false


# is_connected_to_node reports whether the link is up.
func is_connected_to_node():
	return _ready_up


# create adds an object this world owns and returns its id.
func create(properties, id = ""):
	_ensure_identifier()
	if id == "":
		id = "%s-%s" % [_rand(8), _rand(8)]
	objects[id] = {"owner": identifier, "properties": properties.duplicate(true), "scopes": {}}
	_queue(id, "add", properties)
	return id


# set_properties changes some properties of an object this world owns
# (null removes one). It returns false for an object it does not own.
func set_properties(id, changed):
	if not owns(id):
		return false
	var props = objects[id]["properties"]
	for k in changed:
		if changed[k] == null:
			props.erase(k)
		else:
			props[k] = changed[k]
	_queue(id, "update", changed)
	return true


# remove removes an object this world owns.
func remove(id):
	if not owns(id):
		return false
	objects.erase(id)
	_scope_writes.erase(id)
	_queue(id, "remove", {})
	return true


# set_elements creates elements of a scope of an object this world owns,
# or changes some of their fields (the others are kept): elements maps
# element ids to Dictionaries of fields. A tick's writes go as one delta.
# It returns false for an object it does not own.
func set_elements(id, scope, elements):
	if not owns(id):
		return false
	var sc = _scope_of(id, scope)
	var w = _writes_of(id, scope)
	for e in elements:
		if typeof(elements[e]) != TYPE_DICTIONARY:
			push_error("solipsism: element %s is not a Dictionary" % e)
			continue
		if not sc["elements"].has(e):
			sc["elements"][e] = {}
		# Set again after its removal this tick, an element goes whole (a
		# delta may not remove and modify one).
		var into = w["added"] if w["removed"].has(e) else w["modified"]
		if not into.has(e):
			into[e] = {}
		for f in elements[e]:
			sc["elements"][e][f] = elements[e][f]
			into[e][f] = elements[e][f]
	return true


# remove_elements removes elements (an Array of ids) of a scope of an
# object this world owns.
func remove_elements(id, scope, ids):
	if not owns(id):
		return false
	var sc = _scope_of(id, scope)
	var w = _writes_of(id, scope)
	for e in ids:
		sc["elements"].erase(e)
		w["modified"].erase(e)
		w["added"].erase(e)
		w["removed"][e] = true
	return true


# get_elements returns a scope of an object, element id to fields (not to
# be modified), or null.
func get_elements(id, scope):
	if not objects.has(id) or not objects[id]["scopes"].has(scope):
		return null
	return objects[id]["scopes"][scope]["elements"]


# get_scope_version returns a scope's version (0 if there is none).
func get_scope_version(id, scope):
	if not objects.has(id) or not objects[id]["scopes"].has(scope):
		return 0
	return objects[id]["scopes"][scope]["ver"]


func _scope_of(id, scope):
	var scopes = objects[id]["scopes"]
	if not scopes.has(scope):
		scopes[scope] = {"ver": 0, "elements": {}}
	return scopes[scope]


func _writes_of(id, scope):
	if not _scope_writes.has(id):
		_scope_writes[id] = {}
		_scope_order.append(id)
	if not _scope_writes[id].has(scope):
		_scope_writes[id][scope] = {"added": {}, "modified": {}, "removed": {}}
	return _scope_writes[id][scope]


# owns reports whether this world owns object id.
func owns(id):
	return objects.has(id) and objects[id]["owner"] == identifier


# get_properties returns an object's properties (not to be modified), or
# null.
func get_properties(id):
	if not objects.has(id):
		return null
	return objects[id]["properties"]


func _process(_delta):
	if _ws == null:
		return
	var began = OS.get_ticks_usec()
	_ws.poll()
	_drain(began)
	_ask_for_gaps()
	var now = OS.get_ticks_msec()
	if _redial_at >= 0 and now >= _redial_at:
		_redial_at = -1
		_dial()
	if _ready_up and now >= _next_flush:
		_next_flush = now + int(tick_msec * _tick_scale)
		_flush()
	process_usec = OS.get_ticks_usec() - began


func _dial():
	if _ws != null:
		_ws.disconnect_from_host()
	_ws = WebSocketClient.new()
	if _ws.has_method("set_buffers"):
		# A refresh answer comes as messages of up to 256 KiB.
		_ws.set_buffers(4096, 4096, 1024, 4096)
	_ws.connect("connection_established", self, "_on_open")
	_ws.connect("connection_closed", self, "_on_closed")
	_ws.connect("connection_error", self, "_on_error")
	_ws.connect("server_close_request", self, "_on_close_request")
	_ws.connect("data_received", self, "_on_data")
	if _dial_urls.empty():
		_dial_urls = [url] + failover_urls
	current_url = _dial_urls[_next_url % _dial_urls.size()]
	_next_url += 1
	var err = _ws.connect_to_url(current_url)
	if err != OK:
		_on_error()


func _on_open(_protocol):
	_open = true
	_ws.get_peer(1).set_write_mode(WebSocketPeer.WRITE_MODE_TEXT)
	# Our metadata first, unasked; then what the node is.
	_send(["metadataChange", _metadata()])
	_send(["requestMetadata", null])


var _close_code = 1006
var _close_reason = ""


func _on_close_request(code, reason):
	_close_code = code
	_close_reason = reason


func _on_closed(_clean):
	_lost()


func _on_error():
	_close_code = 1006
	_lost()


func _lost():
	var was = _ready_up
	_open = false
	_ready_up = false
	_inbox.clear()
	_inbox_at = 0
	_repair = null
	_gaps.clear()
	# The node removes this world's objects when the link goes. Other
	# worlds' objects stay, so that a short break does not make them vanish
	# and come back: the refresh answer brings them again, and those it
	# does not bring went meanwhile (removed when it ends).
	for id in objects:
		if objects[id]["owner"] != identifier:
			_stale[id] = true
	if was:
		emit_signal("disconnected", _close_code, _close_reason)
	_close_code = 1006
	_close_reason = ""
	if _want and _moving:
		_moving = false
		_redial_at = OS.get_ticks_msec()  # (where the node sent us, at once)
	elif _want:
		_backoff = reconnect_msec if _backoff == 0 else min(_backoff * 2, 8000)
		_redial_at = OS.get_ticks_msec() + _backoff


func _metadata():
	var md = {"identifier": identifier, "identifierChain": [identifier], "role": "client", "features": ["messages", "scopes"]}
	if not _tokens.empty():
		md["resumeTokens"] = _tokens
	return md


func _on_data():
	var peer = _ws.get_peer(1)
	while peer.get_available_packet_count() > 0:
		_receive(peer.get_packet().get_string_from_utf8())


# _receive takes one message as it came: what is not [type, data] is
# refused with a warning, and any data of the wrong shape changes nothing.
func _receive(text):
	var parsed = JSON.parse(text)
	if parsed.error != OK or typeof(parsed.result) != TYPE_ARRAY or parsed.result.size() == 0:
		push_warning("solipsism: a message that is not [type, data]: %s" % text.substr(0, 80))
		return
	_handle(parsed.result[0], parsed.result[1] if parsed.result.size() > 1 else null)


func _handle(type, data):
	match type:
		"requestMetadata":
			_send([_answer_name, _metadata()])
		"metadata", "metadataChange":
			_answer_name = type
			if typeof(data) == TYPE_DICTIONARY and typeof(data.get("identifier")) == TYPE_STRING:
				_node_id = data["identifier"]
			if typeof(data) == TYPE_DICTIONARY and typeof(data.get("resumeTokens")) == TYPE_DICTIONARY:
				for k in data["resumeTokens"]:
					_tokens[k] = data["resumeTokens"][k]
			if not _ready_up:
				_ready_up = true
				_backoff = 0
				# Our whole world, then ask for the node's.
				_pending.clear()
				_order.clear()
				_scope_writes.clear()
				_scope_order.clear()
				_send_world()
				_send(["requestRefresh", null])
				emit_signal("connected")
		"requestRefresh":
			if _ready_up:
				_pending.clear()
				_order.clear()
				_scope_writes.clear()
				_scope_order.clear()
				_send_world()
		"worldChange":
			if typeof(data) == TYPE_DICTIONARY:
				if typeof(data.get("changes")) == TYPE_ARRAY:
					_inbox.append(data["changes"])
				if typeof(data.get("refreshed")) == TYPE_BOOL and data["refreshed"]:
					_inbox.append(null)  # the refresh answer is whole
		"scopeChange":
			# Updates of scopes alone, by object id.
			if typeof(data) == TYPE_DICTIONARY:
				var recs = []
				for id in data:
					recs.append({"type": "update", "id": id, "scopes": data[id]})
				_inbox.append(recs)
		"repairing", "repaired":
			# (In order with the records of the answer they enclose.)
			_inbox.append({"repair": type, "data": data})
		"message":
			if typeof(data) == TYPE_DICTIONARY:
				_message(data)
		"requestLessData":
			_tick_scale = min(_tick_scale * 1.2, 20.0)
		"requestMoreData":
			_tick_scale = max(_tick_scale / 1.2, 0.5)
		_:
			pass  # a message of an extension this client does not speak


# _message takes an ephemeral message: the node's refusal of a write of
# ours is put right (docs/protocol.md, "Property schemas"), others are
# signalled.
func _message(m):
	var type = m.get("type")
	var from = m.get("from")
	if typeof(type) != TYPE_STRING or typeof(from) != TYPE_STRING:
		return
	if type == "solipsism.moved" and from == _node_id:
		_move(m.get("data"))
		return
	if type != "solipsism.refused":
		emit_signal("message", from, type, m.get("data"))
		return
	var d = m.get("data")
	if typeof(d) != TYPE_DICTIONARY or typeof(d.get("id")) != TYPE_STRING:
		return
	var id = d["id"]
	if not owns(id):
		return
	if typeof(d.get("gone")) == TYPE_BOOL and d["gone"]:
		objects.erase(id)
		_pending.erase(id)
		_order.erase(id)
	else:
		if typeof(d.get("properties")) == TYPE_DICTIONARY:
			var props = objects[id]["properties"]
			for k in d["properties"]:
				props[k] = d["properties"][k]
			if _pending.has(id) and _pending[id]["type"] == "update":
				for k in d["properties"]:
					_pending[id]["properties"].erase(k)
		# Each scope the write changed, as the node holds it (a snapshot,
		# version included).
		if typeof(d.get("scopes")) == TYPE_DICTIONARY:
			for name in d["scopes"]:
				if Scopes.valid(d["scopes"][name]):
					Scopes.apply(_scope_of(id, name), d["scopes"][name])
	emit_signal("refused", id, str(d.get("reason")))


# _move follows a draining node's "solipsism.moved" (docs/protocol.md,
# "Draining"): its URLs are dialled first, at once, then our own; the link
# closes with 4006, and the node keeps our objects for us to take back
# there.
func _move(d):
	if typeof(d) != TYPE_DICTIONARY or typeof(d.get("urls")) != TYPE_ARRAY:
		return
	var to = []
	for u in d["urls"]:
		if typeof(u) == TYPE_STRING and u != "":
			to.append(u)
	if to.empty() or _ws == null:
		return
	for u in [url] + failover_urls:
		if not to.has(u):
			to.append(u)
	_dial_urls = to
	_next_url = 0
	_moving = true
	_ws.disconnect_from_host(4006, "moving to another node")


# _drain applies what arrived, in order, until the frame's budget is
# spent.
func _drain(began):
	while not _inbox.empty():
		var recs = _inbox[0]
		if recs == null:
			_inbox.pop_front()
			_refreshed()
			continue
		if typeof(recs) == TYPE_DICTIONARY:
			_inbox.pop_front()
			_repair_step(recs["repair"], recs["data"])
			continue
		var n = recs.size()
		while _inbox_at < n:
			var rec = recs[_inbox_at]
			_inbox_at += 1
			if typeof(rec) == TYPE_DICTIONARY:
				_apply(rec)
			if budget_usec > 0 and (_inbox_at & 15) == 0 and OS.get_ticks_usec() - began > budget_usec:
				return
		_inbox.pop_front()
		_inbox_at = 0


# _refreshed removes the objects kept over a broken link that the refresh
# answer did not bring again: they went while the link was down.
func _refreshed():
	for id in _stale:
		if objects.has(id) and objects[id]["owner"] != identifier:
			objects.erase(id)
			emit_signal("object_removed", id)
	_stale.clear()
	emit_signal("refreshed")


func _apply(rec):
	var id = rec.get("id")
	if typeof(id) != TYPE_STRING or id == "" or owns(id):
		return
	if _repair != null and _repair["answering"] and rec.get("type") == "add":
		_repair["seen"][id] = true
	var scopes = rec.get("scopes")
	if scopes != null and rec.get("type") != "remove":
		if typeof(scopes) != TYPE_DICTIONARY:
			return
		for name in scopes:
			if not Scopes.valid(scopes[name]):
				return
			# A delta that does not apply refuses the whole record; a gap
			# asks for the object again.
			var why = Scopes.check(objects[id]["scopes"].get(name) if objects.has(id) else null, scopes[name])
			if why == "gap":
				_gaps[Scopes.bucket(id)] = true
			if why != "":
				return
	else:
		scopes = {}
	_stale.erase(id)
	var props = rec.get("properties")
	if typeof(props) != TYPE_DICTIONARY:
		props = {}
	match rec.get("type"):
		"add", "update":
			if not objects.has(id):
				if rec.get("type") == "update":
					return  # an update of an unknown object changes nothing
				var owner = rec.get("owner")
				objects[id] = {"owner": owner if typeof(owner) == TYPE_STRING else "", "properties": props, "scopes": {}}
				for name in scopes:
					Scopes.apply(_scope_of(id, name), scopes[name])
				emit_signal("object_added", id, props)
				return
			# (An add of a known object is an update: the owner stays.)
			var cur = objects[id]["properties"]
			var changed = {}
			for k in props:
				if props[k] == null:
					if cur.has(k):
						cur.erase(k)
						changed[k] = null
				elif not cur.has(k) or typeof(cur[k]) != typeof(props[k]) or cur[k] != props[k]:
					cur[k] = props[k]
					changed[k] = props[k]
			# The whole record applies before its signals fire.
			var scope_changes = {}
			for name in scopes:
				scope_changes[name] = Scopes.apply(_scope_of(id, name), scopes[name])
			if not changed.empty():
				emit_signal("object_changed", id, changed)
			for name in scope_changes:
				emit_signal("scope_changed", id, name, scope_changes[name])
		"remove":
			if objects.has(id):
				objects.erase(id)
				emit_signal("object_removed", id)


# _ask_for_gaps asks the node for the objects whose scope deltas came with
# a gap, one request at a time (docs/protocol.md, "Scopes").
func _ask_for_gaps():
	if _gaps.empty() or not _ready_up:
		return
	if _repair != null and OS.get_ticks_msec() - _repair["since"] < 10000:
		return
	var b = _gaps.keys()
	b.sort()
	_gaps.clear()
	_repair = {"buckets": b, "answering": false, "seen": {}, "since": OS.get_ticks_msec()}
	_send(["requestRepair", {"of": Scopes.GAP_BUCKETS, "buckets": b}])


# _repair_step takes "repairing" and "repaired" of the answer to our
# request: its adds came between them; what it did not bring of those
# buckets is gone.
func _repair_step(type, data):
	if _repair == null or typeof(data) != TYPE_DICTIONARY or typeof(data.get("buckets")) != TYPE_ARRAY or int(data.get("of", 0)) != Scopes.GAP_BUCKETS:
		return
	var got = []
	for x in data["buckets"]:
		got.append(int(x))
	if got != _repair["buckets"]:
		return
	if type == "repairing":
		_repair["answering"] = true
		return
	if not _repair["answering"]:
		return
	var r = _repair
	_repair = null
	var gone = []
	for id in objects:
		if objects[id]["owner"] != identifier and not r["seen"].has(id) and r["buckets"].has(Scopes.bucket(id)):
			gone.append(id)
	for id in gone:
		objects.erase(id)
		emit_signal("object_removed", id)


func _queue(id, type, props):
	if not _pending.has(id):
		_pending[id] = {"type": type, "id": id, "owner": identifier, "properties": props.duplicate(true)}
		_order.append(id)
		return
	# One record per object: add+update is an add, add+remove nothing.
	var rec = _pending[id]
	match type:
		"remove":
			if rec["type"] == "add":
				_pending.erase(id)
				_order.erase(id)
			else:
				_pending[id] = {"type": "remove", "id": id, "owner": identifier}
		"add":
			_pending[id] = {"type": "add", "id": id, "owner": identifier, "properties": props.duplicate(true)}
		_:
			if rec["type"] == "remove":
				rec["type"] = "add"
				rec["properties"] = objects[id]["properties"].duplicate(true)
			else:
				for k in props:
					rec["properties"][k] = props[k]


func _flush():
	if _order.empty() and _scope_order.empty():
		return
	var changes = []
	for id in _order:
		changes.append(_pending[id])
	_pending.clear()
	_order.clear()
	# The tick's scope writes, each scope one delta of its next version.
	for id in _scope_order:
		if not owns(id):
			continue
		var deltas = {}
		for name in _scope_writes[id]:
			var sc = _scope_of(id, name)
			sc["ver"] += 1
			var w = _scope_writes[id][name]
			var d = {"ver": sc["ver"]}
			if not w["added"].empty():
				d["added"] = w["added"]
			if not w["modified"].empty():
				d["modified"] = w["modified"]
			if not w["removed"].empty():
				d["removed"] = w["removed"].keys()
			deltas[name] = d
		changes.append({"type": "update", "id": id, "scopes": deltas})
	_scope_writes.clear()
	_scope_order.clear()
	_send(["worldChange", {"timestamp": _now_ms(), "changes": changes}])


func _send_world():
	var changes = []
	for id in objects:
		if objects[id]["owner"] == identifier:
			var rec = {"type": "add", "id": id, "owner": identifier, "properties": objects[id]["properties"]}
			if not objects[id]["scopes"].empty():
				rec["scopes"] = Scopes.snapshots(objects[id]["scopes"])
			changes.append(rec)
	_send(["worldChange", {"timestamp": _now_ms(), "changes": changes}])


func _send(msg):
	if _open:
		_ws.get_peer(1).put_packet(JSON.print(msg).to_utf8())


func _now_ms():
	if OS.has_method("get_system_time_msecs"):
		return OS.get_system_time_msecs()
	return OS.get_unix_time() * 1000


func _rand(n):
	var s = ""
	for _i in range(n):
		s += _ALNUM[randi() % _ALNUM.length()]
	return s
