extends Spatial

# Two players moving: run this scene in two Godot windows, or beside the
# browser demo at http://localhost:8080 (its avatars are "avatar3d"
# objects too). Arrow keys move the player; everyone else's avatars and
# objects appear as the World node's children. SOLIPSISM_URL, when set,
# overrides the Client node's url.

export var speed = 3.0

onready var client = $Client
onready var world = $World
onready var player = $Player

var me = ""


func _ready():
	var url = OS.get_environment("SOLIPSISM_URL")
	if url != "":
		client.url = url
	client.connect("connected", self, "_on_connected")
	client.connect_to_node()


func _on_connected():
	if me == "":
		me = world.track(player, {"kind": "avatar3d", "name": "Godot", "color": "#478cbf"})


func _process(delta):
	var v = Vector3()
	if Input.is_action_pressed("ui_left"):
		v.x -= 1
	if Input.is_action_pressed("ui_right"):
		v.x += 1
	if Input.is_action_pressed("ui_up"):
		v.z -= 1
	if Input.is_action_pressed("ui_down"):
		v.z += 1
	if v != Vector3():
		player.translate(v.normalized() * speed * delta)
