import { useState } from "react";
import type { ChannelView } from "../types";

interface Props {
  channels: ChannelView[];
  current: string | null;
  onSelect: (name: string) => void;
  onCreate: (name: string) => void;
  onRename: (name: string, newName: string) => void;
  onDelete: (name: string) => void;
}

export function Sidebar({ channels, current, onSelect, onCreate, onRename, onDelete }: Props) {
  const [query, setQuery] = useState("");
  const [newName, setNewName] = useState("");
  const [renaming, setRenaming] = useState<string | null>(null);
  const [renameTo, setRenameTo] = useState("");
  const shown = channels.filter((c) => c.name.toLowerCase().includes(query.trim().toLowerCase()));
  return (
    <aside className="sidebar">
      <input
        type="search"
        placeholder="Search channels"
        aria-label="Search channels"
        value={query}
        onChange={(e) => setQuery(e.target.value)}
      />
      <ul className="channels">
        {shown.map((c) => (
          <li key={c.id} className={c.name === current ? "active" : ""}>
            {renaming === c.name ? (
              <form
                onSubmit={(e) => {
                  e.preventDefault();
                  onRename(c.name, renameTo);
                  setRenaming(null);
                }}
              >
                <input aria-label="New name" value={renameTo} autoFocus onChange={(e) => setRenameTo(e.target.value)} />
              </form>
            ) : (
              <button className="channel" onClick={() => onSelect(c.name)}>
                # {c.name}
              </button>
            )}
            <span className="channel-actions">
              <button
                title="Rename"
                aria-label={`Rename ${c.name}`}
                onClick={() => {
                  setRenaming(c.name);
                  setRenameTo(c.name);
                }}
              >
                ✎
              </button>
              <button
                title="Delete"
                aria-label={`Delete ${c.name}`}
                onClick={() => {
                  if (window.confirm(`Delete channel “${c.name}” and its messages?`)) onDelete(c.name);
                }}
              >
                ×
              </button>
            </span>
          </li>
        ))}
        {shown.length === 0 && <li className="muted">no channel matches</li>}
      </ul>
      <form
        className="new-channel"
        onSubmit={(e) => {
          e.preventDefault();
          if (newName.trim()) onCreate(newName.trim());
          setNewName("");
        }}
      >
        <input placeholder="New channel" aria-label="New channel" value={newName} onChange={(e) => setNewName(e.target.value)} />
        <button type="submit">+</button>
      </form>
    </aside>
  );
}
