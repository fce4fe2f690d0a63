// Package web holds the browser side, embedded in the node binary: the
// JavaScript client library (solipsism.js, usable on a page and in a
// WebWorker, with solipsism-worker.js), the demo served at / and the
// inspector served at /inspect.
package web
