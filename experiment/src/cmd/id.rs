//! `experiment id`: ID math on the command line, with the core's layouts.

use clap::Subcommand;
use since_id::id::{Id, Layout};
use since_id::policy::compensated_since_id;
use since_id::time::{parse_duration_ms, parse_time, rfc3339_ms};

#[derive(Subcommand)]
pub enum IdCommand {
    /// Print an ID's time (RFC 3339 in UTC, and ms since the Unix epoch).
    Decode {
        /// The ID, as the API writes it.
        id: String,
        #[arg(long, short, help = layout_help())]
        layout: String,
    },
    /// Print the smallest ID at an instant (RFC 3339 or ms since the Unix epoch).
    At {
        /// RFC 3339 (2016-04-30T11:18:25.796Z) or ms since the Unix epoch.
        time: String,
        #[arg(long, short, help = layout_help())]
        layout: String,
    },
    /// Print the compensated since_id for the next request.
    SinceId {
        #[arg(long, short, help = layout_help())]
        layout: String,
        /// The highest ID seen so far, as the API writes it.
        #[arg(long)]
        latest_id: String,
        /// Client time at which the previous request was sent (RFC 3339 or ms since the Unix epoch).
        #[arg(long)]
        retrieved_at: String,
        /// How far the IDs may be out of order (1s, 1500ms).
        #[arg(long)]
        k: String,
    },
}

/// `--help` of the `id` commands' `--layout`: every name the layouts accept.
fn layout_help() -> String {
    format!(
        "The ID layout: {}, sonyflake:epoch=MS, or custom:epoch=MS,shift=N[,unit=MS]",
        Layout::NAMES.join(", ")
    )
}

pub fn id_command(cmd: IdCommand) -> Result<(), String> {
    let layout = |name: &str| name.parse::<Layout>().map_err(|e| e.to_string());
    match cmd {
        IdCommand::Decode { id, layout: name } => {
            let layout = layout(&name)?;
            let id = layout.parse(&id).map_err(|e| e.to_string())?;
            let ms = layout.ts_ms(id);
            println!("{}\t{ms}", rfc3339_ms(ms));
        }
        IdCommand::At { time, layout: name } => {
            let layout = layout(&name)?;
            let ms = parse_time(&time)?;
            println!("{}", layout.format(layout.min_id_at(ms)));
        }
        IdCommand::SinceId {
            layout: name,
            latest_id,
            retrieved_at,
            k,
        } => {
            let layout = layout(&name)?;
            let latest: Id = layout.parse(&latest_id).map_err(|e| e.to_string())?;
            let retrieved_at = parse_time(&retrieved_at)?;
            let k_ms = parse_duration_ms(&k)?;
            println!(
                "{}",
                layout.format(compensated_since_id(&layout, latest, retrieved_at, k_ms))
            );
        }
    }
    Ok(())
}
