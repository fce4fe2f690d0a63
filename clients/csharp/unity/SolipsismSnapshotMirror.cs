using System.Collections.Generic;
using System.Globalization;
using Solipsism.Snapshot;
using UnityEngine;

// SolipsismSnapshotMirror mirrors a node's world in a Unity scene over the
// snapshot wire: each ghost becomes an instance of the prefab its ghost
// type names (Prefabs; DefaultPrefab for the others), placed by its
// transform, and is destroyed when it despawns; the objects in Owned are
// this client's, and their transforms are sent whenever they move. With
// viewRadius and focus set, it holds only the ghosts near the focus (the
// snapshot wire's interest: docs/bridges.md, "Relevancy and importance").
//
// The protocol's coordinates are right-handed with y up, as the browser
// demo's; Unity's are left-handed: z is negated both ways (and the
// rotation's x and y with it).
public class SolipsismSnapshotMirror : MonoBehaviour
{
    [System.Serializable]
    public class TypePrefab
    {
        public string ghostType;
        public GameObject prefab;
    }

    [Tooltip("The node's --snapshot-listen host")] public string host = "127.0.0.1";
    [Tooltip("The node's --snapshot-listen port")] public int port = 7777;
    public List<TypePrefab> prefabs = new List<TypePrefab>();
    public GameObject defaultPrefab;
    [Tooltip("Transforms of yours the others see")] public List<Transform> owned = new List<Transform>();
    [Tooltip("Receive only the ghosts within this distance of Focus on every axis, and those without a position (0: everything)")] public float viewRadius = 0;
    [Tooltip("Where the view is centred (the player, the camera)")] public Transform focus;

    Client client;
    readonly Dictionary<uint, GameObject> mirrored = new Dictionary<uint, GameObject>();
    readonly Dictionary<Transform, Vector3> sentAt = new Dictionary<Transform, Vector3>();
    readonly Dictionary<Transform, Quaternion> sentRot = new Dictionary<Transform, Quaternion>();
    Vector3 viewAt;
    bool viewSet;

    void Start()
    {
        client = Client.Connect(host, port);
        Hook(client.World);
        client.Resynced += w =>
        {
            foreach (var go in mirrored.Values) Destroy(go);
            mirrored.Clear();
            sentAt.Clear();
            Hook(w);
        };
    }

    void Hook(World w)
    {
        w.Spawned += g =>
        {
            var prefab = defaultPrefab;
            foreach (var tp in prefabs) if (tp.ghostType == g.Type.Name) prefab = tp.prefab;
            if (prefab == null || g.Type.Fields.Length < 2 || g.Type.Fields[0].Kind != FieldKind.Vec3) return;
            var go = Instantiate(prefab, transform);
            go.name = g.Object;
            mirrored[g.Id] = go;
            Place(g, go);
        };
        w.Changed += g =>
        {
            GameObject go;
            if (mirrored.TryGetValue(g.Id, out go)) Place(g, go);
        };
        w.Despawned += g =>
        {
            GameObject go;
            if (mirrored.TryGetValue(g.Id, out go)) { Destroy(go); mirrored.Remove(g.Id); }
        };
    }

    static void Place(Ghost g, GameObject go)
    {
        g.GetVector3(0, out double x, out double y, out double z);
        go.transform.localPosition = new Vector3((float)x, (float)y, -(float)z);
        if (g.Type.Fields[1].Kind == FieldKind.Quat)
        {
            g.GetQuaternion(1, out double qx, out double qy, out double qz, out double qw);
            go.transform.localRotation = new Quaternion(-(float)qx, -(float)qy, (float)qz, (float)qw);
        }
    }

    void Update()
    {
        if (client == null || !client.Poll()) return;
        if (viewRadius > 0 && focus != null && (!viewSet || (focus.position - viewAt).sqrMagnitude > viewRadius * viewRadius / 16))
        {
            // The region follows the focus a quarter of the radius at a
            // time (each change is a command section until acknowledged).
            viewAt = focus.position;
            viewSet = true;
            var c = viewAt;
            client.SetInterest(new[] { new[] { c.x - viewRadius, c.y - viewRadius, -c.z - viewRadius, c.x + viewRadius, c.y + viewRadius, -c.z + viewRadius } }, null);
        }
        foreach (var t in owned)
        {
            if (t == null) continue;
            Vector3 at;
            Quaternion rot;
            if (sentAt.TryGetValue(t, out at) && sentRot.TryGetValue(t, out rot) && (t.position - at).sqrMagnitude < 1e-6f && Quaternion.Angle(t.rotation, rot) < 0.1f) continue;
            sentAt[t] = t.position;
            sentRot[t] = t.rotation;
            var p = t.position;
            var q = t.rotation;
            client.Set(client.Identifier + "-" + t.name, string.Format(CultureInfo.InvariantCulture,
                "{{\"ghostType\":\"transform\",\"position\":[{0},{1},{2}],\"rotation\":[{3},{4},{5},{6}]}}",
                p.x, p.y, -p.z, -q.x, -q.y, q.z, q.w));
        }
    }

    void OnDestroy()
    {
        if (client != null) client.Dispose();
    }
}
