extends SceneTree

# The Godot side of TestEngineClientsFollowDrain (test/drain_process_test.go),
# run headless:
#
#   SOLIPSISM_URL=ws://127.0.0.1:8080/ws godot3-server --path clients/godot -s res://test/drain_test.gd
#
# It makes a box ("gbox") and prints "CONNECTED url" on every link up, with
# the node's URL it is linked to; when another object's "cue" says "move"
# it sets the box's "n" to 2; on "quit" it exits 0 (1 after 60 s).

const Client = preload("res://addons/solipsism/client.gd")


class Driver:
	extends Node

	var client
	var deadline = 0
	var made = false

	func _ready():
		deadline = OS.get_ticks_msec() + 60000
		client = Client.new()
		client.prefix = "godot"
		client.tick_msec = 20
		add_child(client)
		client.connect("connected", self, "_on_connected")
		client.connect("object_changed", self, "_on_changed")
		client.connect_to_node(OS.get_environment("SOLIPSISM_URL"))

	func _on_connected():
		print("CONNECTED " + client.current_url)
		if not made:
			made = true
			client.create({"kind": "box", "n": 1}, "gbox")

	func _on_changed(_id, changed):
		if changed.get("cue") == "move":
			client.set_properties("gbox", {"n": 2})
		elif changed.get("cue") == "quit":
			OS.exit_code = 0
			get_tree().quit()

	func _process(_delta):
		if OS.get_ticks_msec() > deadline:
			print("FAIL timeout")
			OS.exit_code = 1
			get_tree().quit()


func _init():
	root.add_child(Driver.new())
