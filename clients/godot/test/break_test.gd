extends SceneTree

# The Godot side of TestGodotKeepsObjectsOverABreak (test/godot_test.go),
# run headless:
#
#   SOLIPSISM_URL=ws://127.0.0.1:8080/ws godot3-server --path clients/godot -s res://test/break_test.gd
#
# It joins the node and prints a line per event: "CONNECTED id n" (n: the
# how-manieth link), "ADDED id", "REMOVED id", "DOWN" when a link goes,
# "REFRESHED n" when a link's refresh answer has ended. When an object's
# "cue" becomes "break" it closes its link ("BROKE"); it dials again by
# itself 2 s later. Once the second link's refresh answer has ended it
# prints its whole world ("WORLD {json}") and exits 0; 1 on a timeout.

const Client = preload("res://addons/solipsism/client.gd")


class Driver:
	extends Node

	var client
	var broke = false
	var links = 0
	var deadline = 0

	func _ready():
		deadline = OS.get_ticks_msec() + 60000
		client = Client.new()
		client.prefix = "godot"
		client.tick_msec = 20
		client.reconnect_msec = 2000
		add_child(client)
		client.connect("connected", self, "_on_connected")
		client.connect("disconnected", self, "_on_disconnected")
		client.connect("refreshed", self, "_on_refreshed")
		client.connect("object_added", self, "_on_added")
		client.connect("object_changed", self, "_on_changed")
		client.connect("object_removed", self, "_on_removed")
		client.connect_to_node(OS.get_environment("SOLIPSISM_URL"))

	func _on_connected():
		links += 1
		print("CONNECTED %s %d" % [client.identifier, links])

	func _on_disconnected(_code, _reason):
		print("DOWN")

	func _on_refreshed():
		print("REFRESHED %d" % links)
		if links == 2:
			var world = {}
			for id in client.objects:
				world[id] = client.objects[id]
			print("WORLD " + JSON.print(world))
			_end(0)

	func _on_added(id, _props):
		print("ADDED " + id)

	func _on_changed(_id, changed):
		if changed.get("cue") == "break" and not broke:
			broke = true
			client._ws.disconnect_from_host(1000, "break")
			print("BROKE")

	func _on_removed(id):
		print("REMOVED " + id)

	func _process(_delta):
		if OS.get_ticks_msec() > deadline:
			print("TIMEOUT")
			_end(1)

	func _end(code):
		OS.exit_code = code
		get_tree().quit()


func _init():
	root.add_child(Driver.new())
