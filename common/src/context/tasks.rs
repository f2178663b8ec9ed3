//! The session's task graph: the plan's steps with their status. At most one task is
//! active; the engine works on it until a completion signal (or the operator) marks it
//! done, then the next pending task becomes active. All methods are pure state changes.

use serde::{Deserialize, Serialize};

/// A task's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    Pending,
    Active,
    Done,
    Blocked,
}

impl TaskStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Pending => "pending",
            TaskStatus::Active => "active",
            TaskStatus::Done => "done",
            TaskStatus::Blocked => "blocked",
        }
    }
}

/// One step of the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Task {
    pub title: String,
    pub status: TaskStatus,
    /// Turns spent while this task was active (for "stuck for N turns").
    #[serde(default)]
    pub turns_on_it: u32,
    /// Turn it became active / done, when known.
    #[serde(default)]
    pub started_turn: Option<u32>,
    #[serde(default)]
    pub done_turn: Option<u32>,
    /// Why it is blocked, when it is.
    #[serde(default)]
    pub blocker: Option<String>,
}

impl Task {
    pub fn new(title: impl Into<String>) -> Self {
        Task {
            title: title.into(),
            status: TaskStatus::Pending,
            turns_on_it: 0,
            started_turn: None,
            done_turn: None,
            blocker: None,
        }
    }
}

/// The plan as a list of tasks, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskGraph {
    pub tasks: Vec<Task>,
}

impl TaskGraph {
    /// A graph from plan steps (blank steps skipped); the first becomes active.
    pub fn from_steps<I, S>(steps: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut g = TaskGraph {
            tasks: steps
                .into_iter()
                .map(Into::into)
                .filter(|s: &String| !s.trim().is_empty())
                .map(|s| Task::new(s.trim()))
                .collect(),
        };
        g.activate_next(None);
        g
    }

    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// Index of the active task.
    pub fn active_index(&self) -> Option<usize> {
        self.tasks
            .iter()
            .position(|t| t.status == TaskStatus::Active)
    }

    pub fn active(&self) -> Option<&Task> {
        self.active_index().map(|i| &self.tasks[i])
    }

    /// The first pending task (the one that becomes active next).
    pub fn next_pending(&self) -> Option<&Task> {
        self.pending().next()
    }

    /// Pending tasks in plan order.
    pub fn pending(&self) -> impl Iterator<Item = &Task> {
        self.tasks
            .iter()
            .filter(|t| t.status == TaskStatus::Pending)
    }

    pub fn blocked(&self) -> impl Iterator<Item = &Task> {
        self.tasks
            .iter()
            .filter(|t| t.status == TaskStatus::Blocked)
    }

    pub fn done_count(&self) -> usize {
        self.count(TaskStatus::Done)
    }

    pub fn count(&self, status: TaskStatus) -> usize {
        self.tasks.iter().filter(|t| t.status == status).count()
    }

    /// True when every task is done (and there was at least one).
    pub fn is_complete(&self) -> bool {
        !self.tasks.is_empty() && self.tasks.iter().all(|t| t.status == TaskStatus::Done)
    }

    /// Records that a turn was spent: the active task's counter goes up (activating the
    /// next pending task first when none is active). Returns the active task's counter.
    pub fn note_turn(&mut self, turn: u32) -> Option<u32> {
        if self.active_index().is_none() {
            self.activate_next(Some(turn));
        }
        let i = self.active_index()?;
        let t = &mut self.tasks[i];
        t.turns_on_it = t.turns_on_it.saturating_add(1);
        Some(t.turns_on_it)
    }

    /// Marks task `index` done (if it was active, the next pending task becomes active).
    /// Returns its title, for the digest's milestones; `None` for a bad index or a task
    /// already done.
    pub fn mark_done(&mut self, index: usize, turn: u32) -> Option<String> {
        let task = self.tasks.get_mut(index)?;
        if task.status == TaskStatus::Done {
            return None;
        }
        let was_active = task.status == TaskStatus::Active;
        task.status = TaskStatus::Done;
        task.done_turn = Some(turn);
        task.blocker = None;
        let title = task.title.clone();
        if was_active {
            self.activate_next(Some(turn));
        }
        Some(title)
    }

    /// Completes the active task and activates the next pending one. Returns the
    /// completed task's title (`None` when nothing was active).
    pub fn advance(&mut self, turn: u32) -> Option<String> {
        let i = self.active_index()?;
        self.mark_done(i, turn)
    }

    /// Marks task `index` blocked with a reason; if it was active, the next pending task
    /// becomes active. Returns false for a bad index or a task already done.
    pub fn block(&mut self, index: usize, reason: impl Into<String>, turn: u32) -> bool {
        let Some(task) = self.tasks.get_mut(index) else {
            return false;
        };
        if task.status == TaskStatus::Done {
            return false;
        }
        let was_active = task.status == TaskStatus::Active;
        task.status = TaskStatus::Blocked;
        task.blocker = Some(reason.into());
        if was_active {
            self.activate_next(Some(turn));
        }
        true
    }

    /// Puts a blocked task back in the queue (as pending, or active if nothing is).
    pub fn unblock(&mut self, index: usize, turn: u32) -> bool {
        let Some(task) = self.tasks.get_mut(index) else {
            return false;
        };
        if task.status != TaskStatus::Blocked {
            return false;
        }
        task.status = TaskStatus::Pending;
        task.blocker = None;
        if self.active_index().is_none() {
            self.activate_next(Some(turn));
        }
        true
    }

    /// True when the active task has taken `limit` turns or more (0: never).
    pub fn is_stuck(&self, limit: u32) -> bool {
        limit > 0 && self.active().is_some_and(|t| t.turns_on_it >= limit)
    }

    fn activate_next(&mut self, turn: Option<u32>) {
        if let Some(t) = self
            .tasks
            .iter_mut()
            .find(|t| t.status == TaskStatus::Pending)
        {
            t.status = TaskStatus::Active;
            t.started_turn = turn;
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn graph() -> TaskGraph {
        TaskGraph::from_steps([
            "read the code",
            " ",
            "write the fix",
            "add a test",
            "commit",
        ])
    }

    #[test]
    fn first_step_is_active_and_blanks_are_skipped() {
        let g = graph();
        assert_eq!(g.tasks.len(), 4);
        assert_eq!(g.active().map(|t| t.title.as_str()), Some("read the code"));
        assert_eq!(
            g.next_pending().map(|t| t.title.as_str()),
            Some("write the fix")
        );
        assert_eq!(g.done_count(), 0);
    }

    #[test]
    fn advance_walks_the_plan_to_completion() {
        let mut g = graph();
        let mut done = Vec::new();
        for turn in 1..=10 {
            if let Some(t) = g.advance(turn) {
                done.push(t);
            }
        }
        assert_eq!(
            done,
            ["read the code", "write the fix", "add a test", "commit"]
        );
        assert!(g.is_complete());
        assert!(g.active().is_none());
        assert_eq!(g.tasks[1].done_turn, Some(2));
    }

    #[test]
    fn turn_counting_and_stuck() {
        let mut g = graph();
        assert_eq!(g.note_turn(1), Some(1));
        assert_eq!(g.note_turn(2), Some(2));
        assert!(!g.is_stuck(3));
        g.note_turn(3);
        assert!(g.is_stuck(3));
        assert!(!g.is_stuck(0));
        g.advance(4);
        assert!(!g.is_stuck(3));
        assert_eq!(g.active().map(|t| t.started_turn), Some(Some(4)));
    }

    #[test]
    fn mark_done_out_of_order_and_block() {
        let mut g = graph();
        assert_eq!(g.mark_done(2, 1), Some("add a test".to_string()));
        assert_eq!(g.mark_done(2, 1), None);
        assert_eq!(g.mark_done(99, 1), None);
        // Still on the first task; "add a test" is skipped when the plan moves on.
        assert_eq!(g.active_index(), Some(0));
        assert!(g.block(0, "needs credentials", 2));
        assert_eq!(g.active().map(|t| t.title.as_str()), Some("write the fix"));
        assert_eq!(g.blocked().count(), 1);
        g.advance(3);
        assert_eq!(g.active().map(|t| t.title.as_str()), Some("commit"));
        g.advance(4);
        assert!(g.active().is_none());
        assert!(!g.is_complete());
        assert!(g.unblock(0, 5));
        assert_eq!(g.active().map(|t| t.title.as_str()), Some("read the code"));
        g.advance(6);
        assert!(g.is_complete());
    }

    #[test]
    fn empty_graph_is_harmless() {
        let mut g = TaskGraph::default();
        assert_eq!(g.note_turn(1), None);
        assert_eq!(g.advance(1), None);
        assert!(!g.is_complete());
        assert!(!g.block(0, "x", 1));
    }

    #[test]
    fn round_trips_through_json() {
        let mut g = graph();
        g.note_turn(1);
        g.block(1, "why", 1);
        let back: TaskGraph = serde_json::from_str(&serde_json::to_string(&g).unwrap()).unwrap();
        assert_eq!(back, g);
    }
}
