extends SceneTree

# The addon's decoding fuzzed, for TestGodotFuzz (test/godot_test.go), run
# headless:
#
#   godot3-server --path clients/godot -s res://test/fuzz_test.gd
#
# A client and a mirror, connected to nothing, take 20,000 messages: protocol
# messages whose values are drawn from JSON values of every type, and valid
# messages with characters changed or cut. None may raise a script error
# (the Go test reads the output); it prints "FUZZ n objects" and exits 0.

const Client = preload("res://addons/solipsism/client.gd")
const Mirror = preload("res://addons/solipsism/mirror.gd")

const VALUES = ["null", "0", "-1", "1.5", "1e308", "-1e400", "\"\"", "\"o1\"", "\"add\"", "true", "false",
	"[]", "{}", "[1,2,3]", "[1,\"a\",null]", "[0,0,0,0]", "[1,2,3,4]", "[[1],{},2]", "[1e308,-1e308,1e308]",
	"{\"a\":1}", "[0,0]", "[\"x\"]", "[true,false,null,[]]"]
const SEEDS = [
	"[\"worldChange\",{\"timestamp\":1,\"changes\":[{\"type\":\"add\",\"id\":\"o1\",\"owner\":\"w-A-B\",\"properties\":{\"kind\":\"avatar3d\",\"position\":[1,2,3],\"rotation\":[0,0.7,0,0.7]}},{\"type\":\"update\",\"id\":\"o1\",\"owner\":\"w-A-B\",\"properties\":{\"position\":[1,2,4],\"rotation\":[90,10]}},{\"type\":\"remove\",\"id\":\"o2\",\"owner\":\"w-A-B\"}],\"refreshed\":true}]",
	"[\"metadataChange\",{\"identifier\":\"server-A-B\",\"resumeTokens\":{\"c\":\"t\"}}]",
	"[\"requestRefresh\",null]",
	"[\"requestLessData\",null]",
]
const ALPHABET = "[]{}\",:0123456789.-+eEtruefalsn \\u"


class Driver:
	extends Node

	var client
	var mirror
	var rng = RandomNumberGenerator.new()

	func _ready():
		rng.seed = 1
		client = Client.new()
		client.budget_usec = 0
		add_child(client)
		mirror = Mirror.new()
		mirror.client_path = NodePath("../" + client.name)
		add_child(mirror)
		var n = 20000
		for i in range(n):
			client._receive(_message())
			client._drain(OS.get_ticks_usec())
		print("FUZZ %d messages, %d objects held" % [n, client.objects.size()])
		OS.exit_code = 0
		get_tree().quit()

	func _v():
		return VALUES[rng.randi() % VALUES.size()]

	func _pick(options):
		return options[rng.randi() % options.size()]

	func _record():
		var props = _pick(["{\"position\":%s,\"rotation\":%s,\"kind\":%s,\"cue\":%s}" % [_v(), _v(), _v(), _v()], _v()])
		return "{\"type\":%s,\"id\":%s,\"owner\":%s,\"properties\":%s}" % [
			_pick(["\"add\"", "\"update\"", "\"remove\"", _v()]), _pick(["\"o1\"", "\"o2\"", _v()]), _pick(["\"w-A-B\"", _v()]), props]

	func _message():
		match rng.randi() % 3:
			0:
				var recs = []
				for _i in range(rng.randi() % 4):
					recs.append(_pick([_record(), _v()]))
				var changes = _pick(["[" + PoolStringArray(recs).join(",") + "]", _v()])
				return "[\"worldChange\",{\"timestamp\":%s,\"changes\":%s,\"refreshed\":%s}]" % [_v(), changes, _v()]
			1:
				return "[%s,%s]" % [_pick(["\"metadataChange\"", "\"metadata\"", "\"requestMetadata\"", "\"requestRefresh\"",
					"\"requestLessData\"", "\"requestMoreData\"", "\"worldChange\"", _v()]), _pick(["{\"identifier\":%s,\"resumeTokens\":%s}" % [_v(), _v()], _v()])]
		var s = SEEDS[rng.randi() % SEEDS.size()]
		match rng.randi() % 3:
			0:
				var at = rng.randi() % s.length()
				return s.substr(0, at) + ALPHABET[rng.randi() % ALPHABET.length()] + s.substr(at + 1)
			1:
				return s.substr(0, rng.randi() % s.length())
		return _v()


func _init():
	root.add_child(Driver.new())
