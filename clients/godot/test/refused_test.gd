extends SceneTree

# The Godot side of TestGodotRefused (test/godot_test.go), run headless
# against a node started with --schemas docs/demo-schemas.json:
#
#   SOLIPSISM_URL=ws://127.0.0.1:8080/ws godot3-server --path clients/godot -s res://test/refused_test.gd
#
# It creates an avatar the schemas take, then writes a position they
# refuse, and prints "REFUSED id reason" when the client signals the
# refusal, then "POSITION json": its avatar's position as the client holds
# it after. Then it makes a grid with a block and writes a block the
# schemas refuse: "REFUSED grid reason", then "SCOPE grid blocks ver json"
# as the client holds the grid after. It exits 0 then, 1 on a timeout.

const Client = preload("res://addons/solipsism/client.gd")


class Driver:
	extends Node

	var client
	var mine = ""
	var deadline = 0

	func _ready():
		deadline = OS.get_ticks_msec() + 30000
		client = Client.new()
		client.prefix = "godot"
		client.tick_msec = 20
		add_child(client)
		client.connect("connected", self, "_on_connected")
		client.connect("refused", self, "_on_refused")
		client.connect_to_node(OS.get_environment("SOLIPSISM_URL"))

	func _on_connected():
		if mine != "":
			return
		mine = client.create({"kind": "avatar3d", "name": "Godot", "position": [0, 1.6, 0], "rotation": [0, 0, 0]})
		print("MINE " + mine)
		# A tick later (the add out first), a write the schemas refuse.
		get_tree().create_timer(0.2).connect("timeout", self, "_break")

	func _break():
		client.set_properties(mine, {"position": ["up", 1, 0]})

	func _on_refused(id, reason):
		print("REFUSED %s %s" % [id, reason])
		if id == mine:
			print("POSITION " + JSON.print(client.get_properties(id).get("position")))
			# Then a grid: one good block, then a delta with a colour that
			# is markup.
			client.create({"kind": "grid", "position": [0, 0, 0]}, "grid")
			client.set_elements("grid", "blocks", {"0,0,0": {"c": "#d94f4f"}})
			get_tree().create_timer(0.2).connect("timeout", self, "_bad_block")
			return
		print("SCOPE grid blocks %d %s" % [client.get_scope_version("grid", "blocks"), JSON.print(client.get_elements("grid", "blocks"))])
		OS.exit_code = 0
		get_tree().quit()

	func _bad_block():
		client.set_elements("grid", "blocks", {"1,1,1": {"c": "#5fd38d"}, "2,2,2": {"c": "red\"><script>"}})

	func _process(_delta):
		if OS.get_ticks_msec() > deadline:
			print("FAIL no refusal")
			OS.exit_code = 1
			get_tree().quit()


func _init():
	root.add_child(Driver.new())
