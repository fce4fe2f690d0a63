// Package web holds the browser side, embedded in the node binary.
//
// The library: the JavaScript client (solipsism.js, its public API, over
// the modules of lib/; usable on a page, in a WebWorker with
// solipsism-worker.js, and in Node.js; an npm package with TypeScript
// declarations, see package.json and solipsism.d.ts), the networked-aframe
// adapter (naf-adapter.js) and voice between browsers over WebRTC
// signalled through the node (voice.js).
//
// The demos, apart in demos/ but served at the root beside the library:
// the 3D demo at / (A-Frame), the 2D one at /2d, the voxel builder at
// /voxel (a grid whose blocks are the elements of a scope), the
// networked-aframe example at /naf.html and the inspector at /inspect;
// with the pinned third-party builds they load (vendor/: aframe and
// networked-aframe from npm, unmodified, with their licences). The pages
// load nothing from elsewhere; HandlerWith tells them at /config.json
// where to get a token, for a node that requires them, and which STUN/TURN
// servers their voice uses.
package web
