/* A peer built on the reference ENet library, for interoperability tests.
 *   peer server PORT        accept one peer
 *   peer client HOST PORT   connect with 6 channels
 * Both sides send 50 reliable packets on channel 1, one reliable packet of
 * 150000 bytes on channel 2 and 20 unreliable packets on channel 0, and
 * check that they receive the same from the other side: the reliable ones
 * once and in order, the big one intact. Then the client disconnects.
 * Progress goes to stdout, one line per event; exit status 0 on success. */
#include <enet/enet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BIG 150000
/* Peer timeouts (ms): a disconnect whose acknowledgement is lost completes
 * by timeout, as in the C library; the library's 30 s maximum would make a
 * test under loss wait that long for it. 10 s still takes six losses in a
 * row of one command to time out spuriously. */
#define TIMEOUT_MIN 5000
#define TIMEOUT_MAX 10000

static unsigned char big[BIG];

static void send_all(ENetPeer *peer) {
  char buf[32];
  for (int i = 0; i < 50; i++) {
    int n = snprintf(buf, sizeof buf, "reliable %d", i);
    enet_peer_send(peer, 1, enet_packet_create(buf, n, ENET_PACKET_FLAG_RELIABLE));
  }
  enet_peer_send(peer, 2, enet_packet_create(big, BIG, ENET_PACKET_FLAG_RELIABLE));
  for (int i = 0; i < 20; i++) {
    int n = snprintf(buf, sizeof buf, "unreliable %d", i);
    enet_peer_send(peer, 0, enet_packet_create(buf, n, 0));
  }
}

int main(int argc, char **argv) {
  if (argc < 3) return 2;
  for (int i = 0; i < BIG; i++) big[i] = (unsigned char)(3 + i * 7);
  if (enet_initialize() != 0) return 2;
  int server = strcmp(argv[1], "server") == 0;
  ENetAddress addr = {0};
  ENetHost *host;
  ENetPeer *peer = NULL;
  if (server) {
    enet_address_set_host(&addr, "127.0.0.1");
    addr.port = (enet_uint16)atoi(argv[2]);
    host = enet_host_create(&addr, 4, 6, 0, 0);
  } else {
    host = enet_host_create(NULL, 1, 6, 0, 0);
    enet_address_set_host(&addr, argv[2]);
    addr.port = (enet_uint16)atoi(argv[3]);
    peer = enet_host_connect(host, &addr, 6, 0);
    if (peer) enet_peer_timeout(peer, 0, TIMEOUT_MIN, TIMEOUT_MAX);
  }
  if (!host) return 2;
  if (server) {
    printf("listening %u\n", host->address.port);
    fflush(stdout);
  }
  int next = 0, gotbig = 0, sent = 0, unreliable = 0;
  ENetEvent ev;
  /* Up to a minute: under loss, a disconnect whose acknowledgement is
   * lost completes by timeout, as in the C library itself. */
  time_t start = time(NULL);
  while (time(NULL) - start < 60) {
    if (enet_host_service(host, &ev, 10) <= 0) continue;
    switch (ev.type) {
    case ENET_EVENT_TYPE_CONNECT:
      peer = ev.peer;
      enet_peer_timeout(peer, 0, TIMEOUT_MIN, TIMEOUT_MAX);
      printf("connected\n");
      fflush(stdout);
      if (!sent) { send_all(peer); sent = 1; }
      break;
    case ENET_EVENT_TYPE_RECEIVE: {
      ENetPacket *p = ev.packet;
      if (ev.channelID == 1) {
        char want[32];
        int n = snprintf(want, sizeof want, "reliable %d", next);
        if ((int)p->dataLength != n || memcmp(p->data, want, n) != 0) {
          printf("out of order: got %.*s, want %s\n", (int)p->dataLength, p->data, want);
          return 1;
        }
        next++;
      } else if (ev.channelID == 2) {
        if (p->dataLength != BIG || memcmp(p->data, big, BIG) != 0) {
          printf("big packet differs (%zu bytes)\n", p->dataLength);
          return 1;
        }
        gotbig = 1;
      } else if (ev.channelID == 0) {
        unreliable++;
      }
      enet_packet_destroy(p);
      if (next == 50 && gotbig) {
        printf("received all (%d unreliable)\n", unreliable);
        fflush(stdout);
        next++; /* report once */
        if (!server) enet_peer_disconnect_later(peer, 7); /* after what it still has to send */
      }
      break;
    }
    case ENET_EVENT_TYPE_DISCONNECT:
      printf("disconnected %u\n", ev.data);
      fflush(stdout);
      enet_host_destroy(host);
      enet_deinitialize();
      return next > 50 ? 0 : 1;
    default:
      break;
    }
  }
  printf("timed out (reliable %d, big %d)\n", next, gotbig);
  return 1;
}
