/** Builds an element; strings become text nodes (never HTML), so event data cannot inject markup. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on')) el.addEventListener(key.slice(2), value);
    else if (key === 'dataset') Object.assign(el.dataset, value);
    else el.setAttribute(key, value === true ? '' : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function badge(status) {
  return h('span', { class: `badge status-${status}`, 'data-status': status }, status);
}

export function time(ts) {
  return ts ? new Date(ts).toLocaleTimeString() : '';
}

export function json(value, max = 400) {
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return text === undefined ? '' : text.length > max ? `${text.slice(0, max)}…` : text;
}

/** Calls the console API; a POST sends JSON (the server refuses any other body type). */
export async function api(path, init) {
  const post = init?.method === 'POST';
  const res = await fetch(path, {
    ...init,
    ...(post
      ? { headers: { 'content-type': 'application/json', ...init.headers }, body: init.body ?? '{}' }
      : {}),
  });
  const body = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(body?.error?.message ?? `${res.status} ${res.statusText}`);
  return body;
}
