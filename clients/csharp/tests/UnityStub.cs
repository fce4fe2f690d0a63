// The few UnityEngine declarations unity/SolipsismSnapshotMirror.cs uses,
// so that the tests can check it compiles where no Unity is installed.
// Only declarations: nothing here runs.
namespace UnityEngine
{
    public class Object
    {
        public string name;
        public static T Instantiate<T>(T original, Transform parent) where T : Object { return original; }
        public static void Destroy(Object o) { }
    }
    public class Component : Object { public Transform transform; }
    public class Behaviour : Component { }
    public class MonoBehaviour : Behaviour { }
    public class GameObject : Object { public Transform transform; }
    public class Transform : Component
    {
        public Vector3 position, localPosition;
        public Quaternion rotation, localRotation;
    }
    public struct Vector3
    {
        public float x, y, z;
        public Vector3(float x, float y, float z) { this.x = x; this.y = y; this.z = z; }
        public float sqrMagnitude { get { return x * x + y * y + z * z; } }
        public static Vector3 operator -(Vector3 a, Vector3 b) { return new Vector3(a.x - b.x, a.y - b.y, a.z - b.z); }
    }
    public struct Quaternion
    {
        public float x, y, z, w;
        public Quaternion(float x, float y, float z, float w) { this.x = x; this.y = y; this.z = z; this.w = w; }
        public static float Angle(Quaternion a, Quaternion b) { return 0; }
    }
    [System.AttributeUsage(System.AttributeTargets.Field)]
    public class TooltipAttribute : System.Attribute { public TooltipAttribute(string s) { } }
}
