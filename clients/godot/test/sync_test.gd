extends SceneTree

# The Godot side of test/godot_test.go, run headless:
#
#   SOLIPSISM_URL=ws://127.0.0.1:8080/ws godot3-server --path clients/godot -s res://test/sync_test.gd
#
# It joins the node, moves a cube of its own, reports on stdout (one line
# per event) what it sees of the others' objects, and follows the Go
# side's cues: when the object "kind": "go-cube" reaches x = 5 it stops and
# prints its whole world ("WORLD {json}"); when that object's "cue" says
# "remove yours" it removes its cube, and waits for the go-cube to go. It
# exits 0 then, 1 on a failure or a timeout.

const Client = preload("res://addons/solipsism/client.gd")
const Mirror = preload("res://addons/solipsism/mirror.gd")


class Driver:
	extends Node

	var client
	var mirror
	var cube = Spatial.new()
	var mine = ""
	var theirs = ""
	var phase = "moving"
	var next_move = 0
	var deadline = 0

	func _ready():
		deadline = OS.get_ticks_msec() + 60000
		client = Client.new()
		client.prefix = "godot"
		client.tick_msec = 20
		add_child(client)
		mirror = Mirror.new()
		mirror.client_path = NodePath("../" + client.name)
		add_child(mirror)
		mirror.add_child(cube)
		client.connect("connected", self, "_on_connected")
		client.connect("object_added", self, "_on_added")
		client.connect("object_changed", self, "_on_changed")
		client.connect("object_removed", self, "_on_removed")
		client.connect_to_node(OS.get_environment("SOLIPSISM_URL"))

	func _on_connected():
		say("CONNECTED " + client.identifier)
		if mine == "":
			mine = mirror.track(cube, {"kind": "godot-cube"})
			say("MINE " + mine)

	func _on_added(id, props):
		if props.get("kind") == "go-cube":
			theirs = id
			say("SAW-ADD %s %s" % [id, JSON.print(props.get("position"))])
			_check(props)

	func _on_changed(id, changed):
		if id == theirs and changed.has("position"):
			say("SAW-MOVE %s %s" % [id, JSON.print(changed["position"])])
			_check(changed)
		if id == theirs and changed.get("cue") == "remove yours" and phase == "compared":
			mirror.untrack(mine)
			say("REMOVED " + mine)
			phase = "waiting"

	func _on_removed(id):
		if id == theirs:
			say("GONE " + id)
			call_deferred("_gone", id)  # (once every handler has run)

	func _gone(id):
		if mirror.nodes.has(id):
			say("FAIL the mirror still holds " + id)
			_end(1)
			return
		_end(0)

	func _check(props):
		var p = props.get("position")
		if phase == "moving" and typeof(p) == TYPE_ARRAY and float(p[0]) >= 5.0:
			phase = "settling"
			next_move = OS.get_ticks_msec() + 500

	func _process(_delta):
		var now = OS.get_ticks_msec()
		if now > deadline:
			say("TIMEOUT in phase " + phase)
			_end(1)
			return
		if mine == "" or now < next_move:
			return
		match phase:
			"moving":
				cube.translation.x += 1.0
				next_move = now + 100
			"settling":
				# Stopped long enough for the last move to be out: the world
				# as this client holds it, then the cube goes.
				var world = {}
				for id in client.objects:
					world[id] = client.objects[id]
				say("WORLD " + JSON.print(world))
				phase = "compared"

	func say(line):
		print(line)

	func _end(code):
		OS.exit_code = code
		get_tree().quit()


func _init():
	root.add_child(Driver.new())
