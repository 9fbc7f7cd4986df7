//! The node views over the in-process cluster: its one node hosts and leads
//! every group; the logs route checks the node and `lines` before asking it.

use super::harness::TestRouter;

#[tokio::test]
async fn the_node_list_shows_what_each_node_hosts_and_leads() {
    let router = TestRouter::new(3).await;
    let body = router.get("/api/v1/admin/nodes").await.expect(200);
    let node = &body["nodes"][0];
    assert_eq!(body["count"], 1, "{body}");
    assert_eq!(node["groups_hosted"].as_array().map(Vec::len), Some(4), "the meta group and three data groups: {node}");
    assert_eq!(node["groups_led"], node["groups_hosted"]);
    assert_eq!(node["applied_lag"], 0);
    assert_eq!(node["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(body["spread"]["max_led"], 4);
}

#[tokio::test]
async fn the_logs_route_checks_the_node_and_the_line_count() {
    let router = TestRouter::new(1).await;
    router.get("/api/v1/admin/nodes/7/logs").await.expect(404);
    router.get("/api/v1/admin/nodes/x/logs").await.expect(404);
    for bad in ["0", "5001", "-1", "ten"] {
        router.get(&format!("/api/v1/admin/nodes/1/logs?lines={bad}")).await.expect(400);
    }
    // The in-process node has no log of its own to read: the cluster answers 503.
    router.get("/api/v1/admin/nodes/1/logs?lines=5").await.expect(503);
}

#[tokio::test]
async fn a_restart_names_a_known_node_and_a_consistency_level() {
    let router = TestRouter::new(1).await;
    router.post("/api/v1/admin/nodes/7/restart", &serde_json::json!({})).await.expect(404);
    router.post("/api/v1/admin/nodes/1/restart?consistency=most", &serde_json::json!({})).await.expect(400);
    // The in-process node has no process to restart: 503, not a pretended restart.
    router.post("/api/v1/admin/nodes/1/restart", &serde_json::json!({})).await.expect(503);
}

#[tokio::test]
async fn drain_and_remove_refuse_what_would_break_the_cluster() {
    let router = TestRouter::new(1).await;
    router.post("/api/v1/admin/nodes/7/drain", &serde_json::json!({})).await.expect(404);
    router.delete("/api/v1/admin/nodes/7").await.expect(404);
    router.post("/api/v1/admin/nodes/1/drain?consistency=most", &serde_json::json!({})).await.expect(400);
    // An active node is drained before it is removed.
    let body = router.delete("/api/v1/admin/nodes/1").await.expect(409);
    assert!(body["error"].as_str().unwrap_or_default().contains("drain it first"), "{body}");
    // The only node cannot be drained: nothing could take over its groups.
    let body = router.post("/api/v1/admin/nodes/1/drain", &serde_json::json!({})).await.expect(409);
    assert!(body.to_string().contains("only node"), "{body}");
    // And the refusal changed nothing.
    let nodes = router.get("/api/v1/admin/nodes").await.expect(200);
    assert_eq!(nodes["nodes"][0]["state"], "active", "{nodes}");
}

#[tokio::test]
async fn a_cluster_shutdown_needs_its_confirmation() {
    let router = TestRouter::new(1).await;
    for body in [serde_json::json!({}), serde_json::json!({"confirm": "yes"}), serde_json::json!([true])] {
        router.post("/api/v1/admin/cluster/shutdown", &body).await.expect(400);
    }
    // Confirmed, but the in-process node has no process to stop: 503, not a pretended shutdown.
    router.post("/api/v1/admin/cluster/shutdown", &serde_json::json!({"confirm": true})).await.expect(503);
    router.post("/api/v1/admin/nodes/1/drain", &serde_json::json!({"force": true})).await.expect(400);
}

mod leader_spread {
    use std::collections::{BTreeMap, BTreeSet};

    use tessera_api::placement::{LeaderMove, next_leader_move};

    fn plan(leaders: &[(u64, u64)], voters: &[(u64, &[u64])], eligible: &[u64]) -> Vec<LeaderMove> {
        let mut leaders: BTreeMap<u64, u64> = leaders.iter().copied().collect();
        let voters: BTreeMap<u64, Vec<u64>> = voters.iter().map(|(g, v)| (*g, v.to_vec())).collect();
        let eligible: BTreeSet<u64> = eligible.iter().copied().collect();
        let mut moves = Vec::new();
        while let Some(mv) = next_leader_move(&leaders, &voters, &eligible) {
            assert!(moves.len() < 20, "the planner does not converge: {moves:?}");
            leaders.insert(mv.group, mv.to);
            moves.push(mv);
        }
        moves
    }

    #[test]
    fn a_new_node_takes_leaderships_of_groups_it_holds_until_the_spread_is_even() {
        // Five groups on four nodes; node 1 leads three, node 4 (new) none.
        let voters: &[(u64, &[u64])] = &[(0, &[1, 2, 3]), (1, &[1, 2, 4]), (2, &[1, 3, 4]), (3, &[2, 3, 4]), (4, &[1, 2, 3])];
        let moves = plan(&[(0, 1), (1, 1), (2, 1), (3, 2), (4, 3)], voters, &[1, 2, 3, 4]);
        assert_eq!(moves, vec![LeaderMove { group: 1, from: 1, to: 4 }]);
    }

    #[test]
    fn an_even_spread_or_no_shared_group_plans_nothing() {
        let voters: &[(u64, &[u64])] = &[(0, &[1, 2, 3]), (1, &[1, 2, 3]), (2, &[1, 2, 3])];
        assert!(plan(&[(0, 1), (1, 2), (2, 3)], voters, &[1, 2, 3]).is_empty());
        // Node 4 holds no replica of node 1's groups: nothing can move to it.
        let voters: &[(u64, &[u64])] = &[(0, &[1, 2, 3]), (1, &[1, 2, 3])];
        assert!(plan(&[(0, 1), (1, 1)], voters, &[1, 4]).is_empty());
    }

    #[test]
    fn nodes_not_eligible_neither_give_nor_take() {
        // Node 3 is draining (not eligible): its two groups stay, and the others are even.
        let voters: &[(u64, &[u64])] = &[(0, &[1, 2, 3]), (1, &[1, 2, 3]), (2, &[1, 2, 3])];
        assert!(plan(&[(0, 3), (1, 3), (2, 1)], voters, &[1, 2]).is_empty());
        // Four groups led by node 1 over three eligible nodes end 2/1/1.
        let voters: &[(u64, &[u64])] = &[(0, &[1, 2, 3]), (1, &[1, 2, 3]), (2, &[1, 2, 3]), (3, &[1, 2, 3])];
        let moves = plan(&[(0, 1), (1, 1), (2, 1), (3, 1)], voters, &[1, 2, 3]);
        assert_eq!(moves.len(), 2, "{moves:?}");
        assert!(moves.iter().all(|m| m.from == 1) && moves.iter().any(|m| m.to == 2) && moves.iter().any(|m| m.to == 3));
    }
}
