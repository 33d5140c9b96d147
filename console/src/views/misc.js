import { h, replace } from '../dom.js';

export function notFoundView(root, detail) {
  replace(root,
    h('h1', { id: 'not-found' }, 'Not found'),
    h('p', { role: 'alert' }, 'This does not exist, or your key may not see it.'),
    detail ? h('p', { class: 'muted' }, detail) : null,
    h('p', {}, h('a', { href: '#/sandboxes' }, 'Back to the sandboxes')));
}

// laterView is the honest place of a view another part of the service
// brings: it says so instead of pretending.
export function laterView(title, text) {
  return (root) => replace(root, h('h1', {}, title), h('p', { class: 'card' }, text));
}
