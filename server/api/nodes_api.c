/* GET /api/nodes: every node sharing this database, with its role, capacity, running runs and
 * last heartbeat (the database's clock). */
#include "api/api.h"
#include "cluster/nodes.h"
#include "store/store_nodes.h"

void api_nodes(http_request *req, const api_ctx *api) {
    json_t *list = NULL;
    store_status s = store_node_list(api->svc->store, api->nodes ? nodes_stale_seconds(api->nodes) : 30, &list);
    if (s != STORE_OK) {
        api_store_failed(req);
        return;
    }
    http_reply_json(req, 200,
                    json_pack("{s:o, s:s?, s:b}", "nodes", list, "self", api->nodes ? nodes_id(api->nodes) : NULL,
                              "shared", store_shared(api->svc->store)));
}
