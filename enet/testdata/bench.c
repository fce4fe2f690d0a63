/* Benchmarks with the reference ENet library.
 *   bench echo PORT            echo every packet back, reliably
 *   bench client HOST PORT N   N sequential reliable round trips, then N
 *                              pipelined ones; prints the results
 *   bench idle HOST PORT K     connect K peers and stay until stdin closes */
#include <enet/enet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  if (argc < 3 || enet_initialize() != 0) return 2;
  ENetAddress addr = {0};
  ENetEvent ev;
  if (strcmp(argv[1], "echo") == 0) {
    enet_address_set_host(&addr, "127.0.0.1");
    addr.port = (enet_uint16)atoi(argv[2]);
    ENetHost *host = enet_host_create(&addr, 64, 2, 0, 0);
    printf("listening\n");
    fflush(stdout);
    for (;;) {
      if (enet_host_service(host, &ev, 100) > 0 && ev.type == ENET_EVENT_TYPE_RECEIVE) {
        enet_peer_send(ev.peer, ev.channelID, enet_packet_create(ev.packet->data, ev.packet->dataLength, ENET_PACKET_FLAG_RELIABLE));
        enet_packet_destroy(ev.packet);
        enet_host_flush(host);
      }
    }
  }
  int idle = strcmp(argv[1], "idle") == 0;
  int k = idle && argc > 4 ? atoi(argv[4]) : 1;
  ENetHost *host = enet_host_create(NULL, k, 2, 0, 0);
  enet_address_set_host(&addr, argv[2]);
  addr.port = (enet_uint16)atoi(argv[3]);
  ENetPeer *peer = NULL;
  for (int i = 0; i < k; i++) peer = enet_host_connect(host, &addr, 2, 0);
  int connected = 0, quiet = 0;
  while (connected < k) {
    if (enet_host_service(host, &ev, 1000) <= 0) {
      if (++quiet == 10) { printf("connect timed out (%d)\n", connected); return 1; }
      continue;
    }
    if (ev.type == ENET_EVENT_TYPE_CONNECT) connected++;
    if (ev.type == ENET_EVENT_TYPE_DISCONNECT) { printf("disconnected while connecting (%d)\n", connected); return 1; }
  }
  if (idle) {
    printf("connected %d\n", connected);
    fflush(stdout);
    fcntl(0, F_SETFL, O_NONBLOCK);
    char c;
    for (;;) {
      enet_host_service(host, &ev, 50);
      ssize_t r = read(0, &c, 1);
      if (r == 0) break;
    }
    return 0;
  }
  int n = argc > 4 ? atoi(argv[4]) : 1000;
  char msg[64] = "ping";
  double *lat = malloc(sizeof(double) * n);
  for (int i = 0; i < n; i++) {
    double t0 = now();
    enet_peer_send(peer, 1, enet_packet_create(msg, sizeof msg, ENET_PACKET_FLAG_RELIABLE));
    enet_host_flush(host);
    for (;;) {
      if (enet_host_service(host, &ev, 1000) <= 0) { printf("round trip timed out\n"); return 1; }
      if (ev.type == ENET_EVENT_TYPE_RECEIVE) { enet_packet_destroy(ev.packet); break; }
    }
    lat[i] = (now() - t0) * 1000;
  }
  qsort(lat, n, sizeof(double), cmp);
  printf("latency p50=%.3f p99=%.3f\n", lat[n / 2], lat[n * 99 / 100]);
  double t0 = now();
  int got = 0, sent = 0;
  while (got < n) {
    while (sent < n && sent - got < 256) {
      enet_peer_send(peer, 1, enet_packet_create(msg, sizeof msg, ENET_PACKET_FLAG_RELIABLE));
      sent++;
    }
    if (enet_host_service(host, &ev, 1000) <= 0) { printf("throughput timed out at %d\n", got); return 1; }
    if (ev.type == ENET_EVENT_TYPE_RECEIVE) { enet_packet_destroy(ev.packet); got++; }
  }
  printf("throughput %.0f\n", n / (now() - t0));
  return 0;
}
