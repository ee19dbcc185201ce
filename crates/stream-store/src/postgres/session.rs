//! One PostgreSQL connection owned by its own thread.
//!
//! The blocking `postgres` client drives a private tokio runtime, which
//! panics when called from a thread that is already driving async tasks.
//! Callers of the store may be such threads, so every call is a job sent to
//! the connection's thread and waited for on a plain channel: from any
//! thread it behaves like the SQLite backend's blocking calls.

use std::collections::HashMap;
use std::sync::mpsc;

use postgres::{Client, Statement};

use super::connect::Connector;
use crate::StoreError;

/// A connection and the statements prepared on it.
pub(crate) struct Conn {
    client: Option<Client>,
    connector: Connector,
    statements: HashMap<String, Statement>,
    /// Bumped at every (re)connection, so that a transaction notices a
    /// connection lost under it instead of going on outside it.
    generation: u64,
    /// The heads of the sources the open transaction has locked (their rows
    /// stay locked until it ends): its later appends skip the lock.
    heads: HashMap<String, i64>,
}

impl Conn {
    /// The live client, reconnecting first when the last one is closed.
    pub(crate) fn client(&mut self) -> Result<&mut Client, StoreError> {
        let usable = self.client.as_ref().is_some_and(|c| !c.is_closed());
        if !usable {
            self.client = None;
            self.statements.clear();
            let client = self.connector.connect()?;
            self.generation += 1;
            self.client = Some(client);
        }
        self.client
            .as_mut()
            .ok_or_else(|| StoreError::Backend("postgres connection unavailable".into()))
    }

    /// The client of a transaction begun at `generation`; refuses when the
    /// connection was lost since (the server rolled the transaction back).
    pub(crate) fn in_transaction(&mut self, generation: u64) -> Result<&mut Client, StoreError> {
        match self.client.as_mut() {
            Some(c) if self.generation == generation && !c.is_closed() => Ok(c),
            Some(_) | None => Err(StoreError::Backend(
                "postgres connection lost during the transaction; rolled back".into(),
            )),
        }
    }

    /// The locked heads of the open transaction (cleared when one begins).
    pub(crate) fn heads(&mut self) -> &mut HashMap<String, i64> {
        &mut self.heads
    }

    /// The connection generation (see [`Conn::in_transaction`]).
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// `sql` prepared once per connection.
    pub(crate) fn statement(&mut self, sql: &str) -> Result<(&mut Client, Statement), StoreError> {
        if let Some(stmt) = self.statements.get(sql) {
            let stmt = stmt.clone();
            return Ok((self.client()?, stmt));
        }
        let stmt = self.client()?.prepare(sql).map_err(super::backend)?;
        self.statements.insert(sql.to_owned(), stmt.clone());
        Ok((self.client()?, stmt))
    }
}

type Job = Box<dyn FnOnce(&mut Conn) + Send>;

/// The handle of one connection thread. Dropping it ends the thread, which
/// closes the connection (the server rolls back an open transaction).
pub(crate) struct Session {
    jobs: mpsc::Sender<Job>,
}

impl Session {
    /// Connects (so that a wrong URL fails at open) and starts the thread.
    pub(crate) fn open(connector: Connector) -> Result<Self, StoreError> {
        let client = connector.connect()?;
        let mut conn = Conn {
            client: Some(client),
            connector,
            statements: HashMap::new(),
            generation: 1,
            heads: HashMap::new(),
        };
        let (jobs, queue) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("thestream-postgres".into())
            .spawn(move || {
                for job in queue {
                    job(&mut conn);
                }
            })
            .map_err(|e| StoreError::Backend(format!("postgres thread: {e}")))?;
        Ok(Self { jobs })
    }

    /// Runs `f` on the connection's thread and waits for its result.
    pub(crate) fn call<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Conn) -> Result<R, StoreError> + Send + 'static,
    ) -> Result<R, StoreError> {
        let (reply, answer) = mpsc::sync_channel(1);
        let job: Job = Box::new(move |conn| {
            let _ = reply.send(f(conn));
        });
        let gone = || StoreError::Backend("postgres connection thread ended".into());
        self.jobs.send(job).map_err(|_| gone())?;
        answer.recv().map_err(|_| gone())?
    }

    /// Queues `f` without waiting (a rollback on drop).
    pub(crate) fn queue(&self, f: impl FnOnce(&mut Conn) + Send + 'static) {
        let _ = self.jobs.send(Box::new(f));
    }
}
