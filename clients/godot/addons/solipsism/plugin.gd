tool
extends EditorPlugin

# Registers the addon's two nodes in the editor's "Create Node" dialog.


func _enter_tree():
	add_custom_type("SolipsismClient", "Node", preload("client.gd"), null)
	add_custom_type("SolipsismMirror", "Spatial", preload("mirror.gd"), null)


func _exit_tree():
	remove_custom_type("SolipsismClient")
	remove_custom_type("SolipsismMirror")
