/* An Alloverse client that behaves as allonet's does, on the reference
 * ENet library and cJSON, for interoperability tests of a place's ENet
 * endpoint:
 *   allonet HOST PORT VERSION SECONDS
 * VERSION picks the generation, as allonet's major version does:
 *   3: five channels, state 0, commands 1, clock 4 (with ALLONET_TAG_4_0
 *      set in the environment, version 4 in this layout: allonet's 4.0 tag);
 *   4 (allonet since the commit after its 4.0 tag): six channels, audio 0,
 *     commands 1, state 2, assets 3, video 4, clock 5.
 * Like allonet it announces with its version, sends its intent (with the
 * acknowledged revision) at 20 Hz, takes only the last state packet of each
 * poll, keeps the 64 latest states, applies sets and merge patches
 * (asking for a set, with acknowledgement 0, when a patch's base is not
 * held), asks for the time once a second, and spawns one entity once
 * announced (its avatar placed at ALLONET_AVATAR_X, if set). And like
 * allonet built with asserts on (its CI's builds), it
 * aborts when a set, or a merge from a base older than its latest state,
 * leaves its latest state unchanged: the diff allonet computes for its
 * callbacks is then empty, which its delta.c asserts never happens.
 *
 * Output, one line per event: "connected", "response JSON",
 * "state REVISION", "clock", "disconnected DATA", and at the end
 * "final JSON" (the entities of the latest state). Exit status 0 when the
 * time is up, 3 if disconnected, 2 on a setup error; SIGABRT on the
 * assertion. */
#include <cjson/cJSON.h>
#include <enet/enet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HISTORY 64

static cJSON *history[HISTORY];
static int64_t latest_revision;
static int64_t ack;

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int64_t revision_of(const cJSON *state) {
  const cJSON *r = cJSON_GetObjectItemCaseSensitive(state, "revision");
  return cJSON_IsNumber(r) ? (int64_t)r->valuedouble : -1;
}

/* RFC 7396: target merged with patch; takes target. */
static cJSON *merge_patch(cJSON *target, const cJSON *patch) {
  if (!cJSON_IsObject(patch)) {
    cJSON_Delete(target);
    return cJSON_Duplicate(patch, 1);
  }
  if (!cJSON_IsObject(target)) {
    cJSON_Delete(target);
    target = cJSON_CreateObject();
  }
  for (const cJSON *p = patch->child; p; p = p->next) {
    cJSON *t = cJSON_DetachItemFromObjectCaseSensitive(target, p->string);
    if (cJSON_IsNull(p)) {
      cJSON_Delete(t);
      continue;
    }
    cJSON_AddItemToObject(target, p->string, merge_patch(t, p));
  }
  return target;
}

/* allonet's delta.c asserts that the merge diff from its latest state to
 * a new one is never empty. */
static void assert_changed(const cJSON *latest, const cJSON *next) {
  if (latest && cJSON_Compare(latest, next, 1)) {
    printf("ASSERT the state of revision %lld equals the latest one: empty diff\n", (long long)revision_of(next));
    fflush(stdout);
    abort();
  }
}

/* allo_delta_apply, as allonet's client calls it. */
static void take_state(const char *data, size_t len) {
  cJSON *delta = cJSON_ParseWithLength(data, len);
  if (!delta) {
    printf("ASSERT unparseable state\n");
    fflush(stdout);
    abort();
  }
  cJSON *stylej = cJSON_DetachItemFromObjectCaseSensitive(delta, "patch_style");
  int merge = cJSON_IsString(stylej) && strcmp(stylej->valuestring, "merge") == 0;
  cJSON_Delete(stylej);
  cJSON *fromj = cJSON_DetachItemFromObjectCaseSensitive(delta, "patch_from");
  int has_from = fromj != NULL;
  int64_t from = cJSON_IsNumber(fromj) ? (int64_t)fromj->valuedouble : 0;
  cJSON_Delete(fromj);
  if (merge && !has_from) {
    cJSON_Delete(delta);
    ack = 0;
    return;
  }
  cJSON *current = history[((from % HISTORY) + HISTORY) % HISTORY];
  cJSON *latest = history[((latest_revision % HISTORY) + HISTORY) % HISTORY];
  if (has_from && (current == NULL || revision_of(current) != from)) {
    cJSON_Delete(delta); /* unmergeable: ask for a set */
    ack = 0;
    return;
  }
  cJSON *result;
  if (!merge) {
    assert_changed(latest, delta);
    result = delta;
  } else {
    result = merge_patch(cJSON_Duplicate(current, 1), delta);
    if (latest != current) assert_changed(latest, result);
    cJSON_Delete(delta);
  }
  int64_t rev = revision_of(result);
  int slot = ((rev % HISTORY) + HISTORY) % HISTORY;
  cJSON_Delete(history[slot]);
  history[slot] = result;
  latest_revision = rev;
  ack = rev;
  printf("state %lld\n", (long long)rev);
}

static void send_json(ENetPeer *peer, int channel, const char *json, int reliable) {
  enet_peer_send(peer, channel, enet_packet_create(json, strlen(json), reliable ? ENET_PACKET_FLAG_RELIABLE : 0));
}

static void send_request(ENetPeer *peer, int channel, const char *id, const char *body) {
  char buf[1024];
  snprintf(buf, sizeof buf, "[\"interaction\",\"request\",\"\",\"place\",\"%s\",%s]", id, body);
  send_json(peer, channel, buf, 1);
}

int main(int argc, char **argv) {
  if (argc < 5) return 2;
  int version = atoi(argv[3]);
  double seconds = atof(argv[4]);
  int v3 = version < 4 || getenv("ALLONET_TAG_4_0") != NULL;
  int channels = v3 ? 5 : 6, ch_state = v3 ? 0 : 2, ch_commands = 1, ch_clock = v3 ? 4 : 5;
  if (enet_initialize() != 0) return 2;
  ENetHost *host = enet_host_create(NULL, 1, channels, 0, 0);
  ENetAddress addr = {0};
  enet_address_set_host(&addr, argv[1]);
  addr.port = (enet_uint16)atoi(argv[2]);
  ENetPeer *peer = host ? enet_host_connect(host, &addr, channels, 0) : NULL;
  if (!peer) return 2;
  enet_peer_timeout(peer, 0, 5000, 10000);
  int connected = 0, spawned = 0, clocked = 0;
  double start = now_seconds(), last_clock = 0, last_intent = 0;
  while (now_seconds() - start < seconds) {
    ENetEvent ev;
    ENetPacket *last_state = NULL;
    while (enet_host_service(host, &ev, 10) > 0) {
      switch (ev.type) {
      case ENET_EVENT_TYPE_CONNECT: {
        connected = 1;
        printf("connected\n");
        /* ALLONET_AVATAR_X places the avatar, as an app's transform does. */
        char avatar[160] = "{\"geometry\":\"avatar\"}";
        const char *ax = getenv("ALLONET_AVATAR_X");
        if (ax)
          snprintf(avatar, sizeof avatar,
                   "{\"geometry\":\"avatar\",\"transform\":{\"matrix\":[1,0,0,0,0,1,0,0,0,0,1,0,%s,0,0,1]}}", ax);
        char body[384];
        snprintf(body, sizeof body,
                 "[\"announce\",\"version\",%d,\"identity\",{\"display_name\":\"allonet.c\"},\"spawn_avatar\",%s]",
                 version, avatar);
        send_request(peer, ch_commands, "ANN0", body);
        break;
      }
      case ENET_EVENT_TYPE_RECEIVE:
        if (ev.channelID == ch_state) {
          /* allonet's "only process the latest incoming diff" */
          if (last_state) enet_packet_destroy(last_state);
          last_state = ev.packet;
          continue;
        }
        if (ev.channelID == ch_commands) {
          cJSON *cmd = cJSON_ParseWithLength((const char *)ev.packet->data, ev.packet->dataLength);
          cJSON *body = cJSON_GetArrayItem(cmd, 5);
          char *s = cJSON_PrintUnformatted(body);
          printf("response %s\n", s ? s : "null");
          free(s);
          const cJSON *verb = cJSON_GetArrayItem(body, 0), *second = cJSON_GetArrayItem(body, 1);
          if (!spawned && cJSON_IsString(verb) && strcmp(verb->valuestring, "announce") == 0 && cJSON_IsString(second) &&
              strcmp(second->valuestring, "error") != 0) {
            spawned = 1;
            send_request(peer, ch_commands, "SPAWN1", "[\"spawn_entity\",{\"n\":1,\"made_by\":\"allonet.c\"}]");
          }
          cJSON_Delete(cmd);
        } else if (ev.channelID == ch_clock) {
          cJSON *c = cJSON_ParseWithLength((const char *)ev.packet->data, ev.packet->dataLength);
          if (!clocked && cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(c, "server_time"))) {
            clocked = 1;
            printf("clock\n");
          }
          cJSON_Delete(c);
        }
        enet_packet_destroy(ev.packet);
        break;
      case ENET_EVENT_TYPE_DISCONNECT:
        printf("disconnected %u\n", ev.data);
        fflush(stdout);
        return 3;
      default:
        break;
      }
    }
    if (last_state) {
      take_state((const char *)last_state->data, last_state->dataLength);
      enet_packet_destroy(last_state);
    }
    if (connected && now_seconds() - last_intent >= 0.05) {
      last_intent = now_seconds();
      char intent[512];
      snprintf(intent, sizeof intent,
               "{\"cmd\":\"intent\",\"intent\":{\"entity_id\":\"\",\"wants_stick_movement\":false,\"zmovement\":0,"
               "\"xmovement\":0,\"yaw\":0,\"pitch\":0,\"poses\":{},\"ack_state_rev\":%lld}}",
               (long long)ack);
      send_json(peer, ch_state, intent, 0);
    }
    if (connected) {
      if (now_seconds() - last_clock > 1) {
        last_clock = now_seconds();
        char req[64];
        snprintf(req, sizeof req, "{\"client_time\":%.6f}", last_clock);
        send_json(peer, ch_clock, req, 0);
      }
    }
    fflush(stdout);
  }
  cJSON *latest = history[((latest_revision % HISTORY) + HISTORY) % HISTORY];
  char *s = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(latest, "entities"));
  printf("final %s\n", s ? s : "null");
  free(s);
  fflush(stdout);
  enet_peer_disconnect(peer, 0);
  ENetEvent ev;
  for (int i = 0; i < 50 && enet_host_service(host, &ev, 10) >= 0; i++) {
    if (ev.type == ENET_EVENT_TYPE_DISCONNECT) break;
  }
  return 0;
}
