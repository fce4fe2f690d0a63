extends SceneTree

# The Godot side of BenchmarkGodotFrame (test/godot_bench_test.go), run
# headless at 60 frames a second:
#
#   SOLIPSISM_URL=ws://127.0.0.1:8080/ws SOLIPSISM_OBJECTS=500 godot3-server --path clients/godot -s res://test/frame_bench.gd
#
# It joins the node and measures the time the addon takes a frame (the
# client's _process: WebSocket polling, decoding, the mirror's updates),
# first with the world empty ("EMPTY <mean µs> <p99 µs> <frames>"), then,
# once it mirrors SOLIPSISM_OBJECTS objects, while the others move them
# ("LOADED <mean µs> <p99 µs> <frames> <changes a second>", then the same
# three figures for the frame's whole process time). It exits 0 then, 1
# on a timeout.

const Client = preload("res://addons/solipsism/client.gd")
const Mirror = preload("res://addons/solipsism/mirror.gd")


class Bench:
	extends Node

	var client
	var mirror
	var want = 0
	var phase = "connecting"
	var until = 0
	var samples = []
	var wholes = []
	var changes = 0
	var deadline = 0

	func _ready():
		Engine.target_fps = 60
		want = int(OS.get_environment("SOLIPSISM_OBJECTS"))
		deadline = OS.get_ticks_msec() + 120000
		client = Client.new()
		client.prefix = "godotbench"
		add_child(client)
		mirror = Mirror.new()
		mirror.client_path = NodePath("../" + client.name)
		add_child(mirror)
		client.connect("connected", self, "_on_connected")
		client.connect("object_changed", self, "_on_changed")
		client.connect_to_node(OS.get_environment("SOLIPSISM_URL"))

	func _on_connected():
		if phase == "connecting":
			phase = "empty"
			until = OS.get_ticks_msec() + 3000
			print("CONNECTED " + client.identifier)

	func _on_changed(_id, _changed):
		changes += 1

	func _process(_delta):
		var now = OS.get_ticks_msec()
		if now > deadline:
			print("TIMEOUT in phase %s with %d objects" % [phase, mirror.nodes.size()])
			_end(1)
			return
		# (The addon's time in the previous frame: this one's may not be
		# over, and the frame's whole process time next to it.)
		var t = client.process_usec / 1e6
		var whole = Performance.get_monitor(Performance.TIME_PROCESS)
		if phase == "loaded":
			wholes.append(whole)
		match phase:
			"empty":
				samples.append(t)
				if now >= until:
					print("EMPTY " + _stats())
					phase = "filling"
			"filling":
				if mirror.nodes.size() >= want:
					phase = "loaded"
					until = now + 5000
					samples.clear()
					changes = 0
					print("FILLED %d" % mirror.nodes.size())
			"loaded":
				samples.append(t)
				if now >= until:
					var addon = _stats()
					samples = wholes
					print("LOADED %s %d %s" % [addon, changes / 5, _stats()])
					_end(0)

	func _stats():
		samples.sort()
		var sum = 0.0
		for s in samples:
			sum += s
		var n = samples.size()
		return "%d %d %d" % [int(sum / n * 1e6), int(samples[int(n * 0.99)] * 1e6), n]

	func _end(code):
		OS.exit_code = code
		get_tree().quit()


func _init():
	root.add_child(Bench.new())
