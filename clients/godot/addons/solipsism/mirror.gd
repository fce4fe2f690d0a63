extends Spatial

# SolipsismMirror shows a SolipsismClient's world as child nodes: each
# object of another world with a "position" becomes an instance of the
# scene its "kind" names in scenes (default_scene, or a small cube, for
# others), placed and turned as its properties say, and freed when it
# goes. track() makes a node of yours an object the others see, its
# transform sent whenever it moves.
#
# Properties read and written: "position" [x, y, z] in metres; "rotation"
# [yaw, pitch, roll] in degrees (the 3D demo's avatars send [yaw, pitch])
# or a quaternion [x, y, z, w]; "kind" picks the scene.

# The SolipsismClient whose world is shown.
export(NodePath) var client_path = NodePath("..")
# kind -> PackedScene.
export(Dictionary) var scenes = {}
# The scene of kinds not in scenes; a 0.5 m cube when empty.
export(PackedScene) var default_scene = null
# Smallest move worth sending, in metres (and degrees).
export var precision = 0.001

var client = null
# id -> Spatial: the nodes mirroring other worlds' objects.
var nodes = {}
var _tracked = {}  # id -> [node, last position, last rotation]
var _cube = null  # the default cubes' mesh, shared


func _ready():
	client = get_node(client_path)
	client.connect("object_added", self, "_on_added")
	client.connect("object_changed", self, "_on_changed")
	client.connect("object_removed", self, "_on_removed")
	for id in client.objects:
		if not client.owns(id):
			_on_added(id, client.objects[id]["properties"])


# track makes node (a Spatial of yours) an object of this world with the
# given properties and its transform; returns its id. untrack removes it.
func track(node, properties = {}):
	var props = properties.duplicate(true)
	var at = _position_of(node)
	var rot = _rotation_of(node)
	props["position"] = at
	props["rotation"] = rot
	var id = client.create(props)
	_tracked[id] = [node, at, rot]
	return id


func untrack(id):
	_tracked.erase(id)
	client.remove(id)


func _process(_delta):
	for id in _tracked:
		var t = _tracked[id]
		var node = t[0]
		if not is_instance_valid(node):
			continue
		var changed = {}
		var at = _position_of(node)
		if at != t[1]:
			changed["position"] = at
			t[1] = at
		var rot = _rotation_of(node)
		if rot != t[2]:
			changed["rotation"] = rot
			t[2] = rot
		if not changed.empty():
			client.set_properties(id, changed)


func _on_added(id, props):
	if nodes.has(id) or typeof(props.get("position")) != TYPE_ARRAY:
		return
	var node = _instance(props.get("kind"))
	node.name = "obj_" + id.replace("-", "_")
	nodes[id] = node
	add_child(node)
	_place(node, props)


func _on_changed(id, changed):
	if not nodes.has(id):
		_on_added(id, client.objects[id]["properties"])
		return
	_place(nodes[id], changed)


func _on_removed(id):
	if nodes.has(id):
		nodes[id].queue_free()
		nodes.erase(id)


func _instance(kind):
	if typeof(kind) == TYPE_STRING and scenes.has(kind):
		return scenes[kind].instance()
	if default_scene != null:
		return default_scene.instance()
	if _cube == null:
		_cube = CubeMesh.new()
		_cube.size = Vector3(0.5, 0.5, 0.5)
	var cube = MeshInstance.new()
	cube.mesh = _cube
	return cube


func _place(node, props):
	var p = _numbers(props.get("position"), 3)
	if typeof(p) == TYPE_ARRAY:
		node.translation = Vector3(p[0], p[1], p[2])
	var r = props.get("rotation")
	if typeof(r) != TYPE_ARRAY or r.empty():
		return
	if r.size() == 4:
		var q = _numbers(r, 4)
		if typeof(q) == TYPE_ARRAY:
			var quat = Quat(q[0], q[1], q[2], q[3])
			if quat.length_squared() > 1e-12:
				node.transform.basis = Basis(quat.normalized())
		return
	var d = _numbers(r, min(r.size(), 3))
	if typeof(d) == TYPE_ARRAY:
		node.rotation_degrees = Vector3(d[1] if d.size() > 1 else 0.0, d[0], d[2] if d.size() > 2 else 0.0)


# _numbers returns the first n values of a as floats, or null unless a is
# an array whose first n values are numbers within ±1e9 (a position or angle
# past that is not one a scene can show).
func _numbers(a, n):
	if typeof(a) != TYPE_ARRAY or a.size() < n:
		return null
	var out = []
	for i in range(n):
		var t = typeof(a[i])
		if t != TYPE_REAL and t != TYPE_INT:
			return null
		var f = float(a[i])
		if is_nan(f) or abs(f) > 1e9:
			return null
		out.append(f)
	return out


func _position_of(node):
	var p = node.global_transform.origin
	return [_round(p.x), _round(p.y), _round(p.z)]


func _rotation_of(node):
	var r = node.rotation_degrees
	return [_round(r.y), _round(r.x), _round(r.z)]


func _round(v):
	return stepify(v, precision)
