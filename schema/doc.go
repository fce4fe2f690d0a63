// Package schema keeps objects' properties within bounds an operator
// declares, so that no client can write what breaks the world for
// everyone (a NaN position that JSON carries as null, a colour that is
// not one, a name of a megabyte).
//
// A schema file is JSON: a JSON Schema (draft 2020-12) per object kind,
// for the object's properties as one JSON object, and optionally one for
// objects of any other kind:
//
//	{
//	  "kindProperty": "kind",
//	  "kinds": {
//	    "ball": {
//	      "type": "object",
//	      "properties": {"position": {"$ref": "#/$defs/vec3"}},
//	      "required": ["position"]
//	    }
//	  },
//	  "default": {"type": "object"},
//	  "$defs": {"vec3": {"type": "array", "items": {"type": "number"}, "minItems": 3, "maxItems": 3}}
//	}
//
// A file may also give, under "elements", a schema per kind and scope for
// one element's fields (a grid's block): every element a write adds or
// modifies is checked as it would be after the write.
//
// An object's kind is the string in its kind property ("kind" unless the
// file says otherwise). Every write is checked against the object as it
// would be after the write (its other properties included), so
// "required" and "additionalProperties" mean what they say for partial
// updates too; an object of a kind without a schema, when there is no
// default, is not checked. A Set is read-only once made and safe for
// concurrent use.
//
// Validation is santhosh-tekuri/jsonschema's: standard JSON Schema, which
// operators know and tools write, rather than a format of our own.
package schema
