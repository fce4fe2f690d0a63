extends SceneTree

# The Godot side of TestGodotScopes and TestGodotScopeGap
# (test/godot_test.go), run headless:
#
#   SOLIPSISM_URL=ws://127.0.0.1:8080/ws godot3-server --path clients/godot -s res://test/scopes_test.gd
#
# It makes a grid of its own ("ggrid") and writes its blocks element by
# element (a removal and a set of one block in one tick included), then
# follows the other side's cues, a property "cue" of any object: "check"
# prints "SCOPE id blocks ver {elements}" for that object and for ggrid,
# and "WORLD {json}"; "quit" exits 0. It exits 1 after 60 s.

const Client = preload("res://addons/solipsism/client.gd")


class Driver:
	extends Node

	var client
	var deadline = 0
	var wrote = false

	func _ready():
		deadline = OS.get_ticks_msec() + 60000
		client = Client.new()
		client.prefix = "godot"
		client.tick_msec = 20
		add_child(client)
		client.connect("connected", self, "_on_connected")
		client.connect("disconnected", self, "_on_disconnected")
		client.connect("object_added", self, "_on_added")
		client.connect("object_changed", self, "_on_changed")
		client.connect("object_removed", self, "_on_removed")
		client.connect("scope_changed", self, "_on_scope")
		client.connect_to_node(OS.get_environment("SOLIPSISM_URL"))

	func _on_connected():
		print("CONNECTED " + client.identifier)
		if wrote:
			return
		wrote = true
		client.create({"kind": "grid", "position": [1, 0, 0]}, "ggrid")
		client.set_elements("ggrid", "blocks", {"0,0,0": {"t": "stone", "n": 1}, "1,0,0": {"t": "dirt", "c": "red"}})
		get_tree().create_timer(0.2).connect("timeout", self, "_more")

	func _on_disconnected(code, reason):
		print("DISCONNECTED %d %s" % [code, reason])

	func _more():
		# One tick: a change, a removal, and the removed block set again.
		client.set_elements("ggrid", "blocks", {"1,0,0": {"c": "blue"}})
		client.remove_elements("ggrid", "blocks", ["0,0,0"])
		client.set_elements("ggrid", "blocks", {"0,0,0": {"t": "glass"}})
		print("WROTE")

	func _on_added(id, properties):
		print("ADDED %s %s" % [id, JSON.print(properties)])

	func _on_removed(id):
		print("REMOVED " + id)

	func _on_scope(id, scope, change):
		print("SCOPECHANGED %s %s -%d +%d ~%d" % [id, scope, change["removed"].size(), change["added"].size(), change["modified"].size()])

	func _on_changed(id, changed):
		if not changed.has("cue"):
			return
		if changed["cue"] == "check":
			for of in [id, "ggrid"]:
				var e = client.get_elements(of, "blocks")
				print("SCOPE %s blocks %d %s" % [of, client.get_scope_version(of, "blocks"), JSON.print(e if e != null else {})])
			print("WORLD " + JSON.print(client.objects))
		elif changed["cue"] == "quit":
			OS.exit_code = 0
			get_tree().quit()

	func _process(_delta):
		if OS.get_ticks_msec() > deadline:
			print("FAIL timeout")
			OS.exit_code = 1
			get_tree().quit()


func _init():
	root.add_child(Driver.new())
