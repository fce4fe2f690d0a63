extends Reference

# Scopes (docs/protocol.md, "Scopes"): an object's keyed sub-collections,
# a grid's blocks, each element a Dictionary of fields. A scope is held as
# {"ver": int, "elements": {id: {field: value}}}. Static helpers of
# client.gd: checking a delta against a scope, applying it, and the hash
# that names an object's bucket when a delta comes with a gap.

const GAP_BUCKETS = 4096


# valid reports whether d is a scope delta as the wire carries it.
static func valid(d):
	if typeof(d) != TYPE_DICTIONARY or not (typeof(d.get("ver")) in [TYPE_REAL, TYPE_INT]) or d["ver"] < 0:
		return false
	if d.has("base") and (not (typeof(d["base"]) in [TYPE_REAL, TYPE_INT]) or d["base"] > d["ver"]):
		return false
	for k in ["added", "modified"]:
		if d.has(k):
			if typeof(d[k]) != TYPE_DICTIONARY:
				return false
			for e in d[k]:
				if typeof(d[k][e]) != TYPE_DICTIONARY:
					return false
	if d.has("removed"):
		if typeof(d["removed"]) != TYPE_ARRAY:
			return false
		for e in d["removed"]:
			if typeof(e) != TYPE_STRING:
				return false
	return true


# check returns "" if delta d applies to scope sc (null: none yet),
# "stale" if it is not newer, "gap" if it is built on a version sc lacks.
static func check(sc, d):
	if sc == null or d.get("full") == true or int(d["ver"]) == 0:
		return ""
	var ver = int(d["ver"])
	var base = int(d["base"]) if d.has("base") else ver - 1
	if base > sc["ver"]:
		return "gap"
	if ver <= sc["ver"]:
		return "stale"
	return ""


# apply applies delta d to scope sc (removals first, then additions, then
# modifications) and returns what changed: {"reset", "removed", "added",
# "modified"}.
static func apply(sc, d):
	var ch = {"reset": d.get("full") == true, "removed": [], "added": {}, "modified": {}}
	var elems = sc["elements"]
	if ch["reset"]:
		ch["removed"] = elems.keys()
		elems.clear()
	for e in d.get("removed", []):
		if elems.has(e):
			elems.erase(e)
			ch["removed"].append(e)
	var added = d.get("added", {})
	for e in added:
		elems[e] = added[e].duplicate(true)
		ch["added"][e] = added[e]
	var modified = d.get("modified", {})
	for e in modified:
		if not elems.has(e):
			elems[e] = modified[e].duplicate(true)
			ch["added"][e] = modified[e]
			continue
		for f in modified[e]:
			elems[e][f] = modified[e][f]
		ch["modified"][e] = modified[e]
	sc["ver"] = sc["ver"] + 1 if int(d["ver"]) == 0 else int(d["ver"])
	return ch


# bucket returns IDHash(id) mod GAP_BUCKETS: FNV-1a, 64 bits, of the id's
# UTF-8 bytes (int arithmetic wraps as unsigned would in the low bits).
static func bucket(id):
	var h = -3750763034362895579  # 0xcbf29ce484222325
	for b in id.to_utf8():
		h = (h ^ b) * 1099511628211  # 0x100000001b3
	return h & (GAP_BUCKETS - 1)


# snapshots returns an owner's scopes (name -> scope) as snapshot deltas,
# for an add that gives the object whole. Each is a new version of its
# scope: the writes it holds that were never sent must not go again as a
# version the node already has (and a snapshot of version 0 would be
# numbered by the node, apart from ours).
static func snapshots(scopes):
	var out = {}
	for name in scopes:
		scopes[name]["ver"] += 1
		out[name] = {"ver": scopes[name]["ver"], "added": scopes[name]["elements"], "full": true}
	return out
