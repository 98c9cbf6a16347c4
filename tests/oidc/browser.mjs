// Test-only "browser" for kharon's login tests: what a person does in a real browser, done with
// fetch and a cookie jar against tests/oidc/provider.mjs.
//
//   node browser.mjs <authorize-url>            follow it, sign in, consent, then GET the
//                                               http://localhost:18000 callback kharonctl serves
//   node browser.mjs --deny <authorize-url>     answer the callback with error=access_denied
//   node browser.mjs --device <uri> <user_code> enter the code on the device page, sign in, consent
//
// Env: LOGIN (default "alice"). Exit code 0 when the callback (or device success page) was reached.
const jar = new Map();
const login = process.env.LOGIN || 'alice';
const log = (...a) => console.error('browser:', ...a);

function cookieHeader() {
  return [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
}

async function request(url, init = {}) {
  const headers = { ...(init.headers || {}), cookie: cookieHeader() };
  const res = await fetch(url, { ...init, headers, redirect: 'manual' });
  for (const c of res.headers.getSetCookie()) {
    const [pair] = c.split(';');
    const i = pair.indexOf('=');
    jar.set(pair.slice(0, i).trim(), pair.slice(i + 1).trim());
  }
  return res;
}

function isCallback(url) {
  const u = new URL(url);
  return u.hostname === 'localhost' && u.port === '18000';
}

async function callback(url) {
  log('callback', new URL(url).searchParams.has('code') ? '(code)' : url);
  const res = await fetch(url, { redirect: 'manual' });
  const body = await res.text();
  log('callback answered', res.status, body.slice(0, 200).replace(/\s+/g, ' '));
  process.exit(res.status < 400 ? 0 : 3);
}

function parseForm(html, base) {
  const form = html.match(/<form[^>]*>/i);
  if (!form) return null;
  const action = (form[0].match(/action="([^"]*)"/i) || [])[1] || base;
  const fields = new URLSearchParams();
  for (const input of html.matchAll(/<input[^>]*>/gi)) {
    const name = (input[0].match(/name="([^"]*)"/i) || [])[1];
    if (!name) continue;
    const value = (input[0].match(/value="([^"]*)"/i) || [])[1] || '';
    fields.set(name, value);
  }
  return { action: new URL(action.replaceAll('&amp;', '&'), base).toString(), fields };
}

async function walk(url, init, userCode) {
  for (let step = 0; step < 20; step++) {
    if (isCallback(url)) return callback(url);
    const res = await request(url, init);
    init = {};
    if (res.status >= 300 && res.status < 400) {
      url = new URL(res.headers.get('location'), url).toString();
      continue;
    }
    const html = await res.text();
    const form = parseForm(html, url);
    if (!form) {
      log('final page', res.status, html.replace(/<[^>]*>/g, ' ').replace(/\s+/g, ' ').slice(0, 200));
      process.exit(res.status < 400 ? 0 : 4);
    }
    if (form.fields.has('login')) form.fields.set('login', login);
    if (form.fields.has('password')) form.fields.set('password', 'any-password');
    if (form.fields.has('user_code') && userCode) form.fields.set('user_code', userCode);
    log('submit', new URL(form.action).pathname, [...form.fields.keys()].join(','));
    url = form.action;
    init = {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: form.fields.toString(),
    };
  }
  log('too many steps');
  process.exit(5);
}

const args = process.argv.slice(2);
const timer = setTimeout(() => { log('timeout'); process.exit(6); }, 30000);
timer.unref();
try {
  if (args[0] === '--deny') {
    const state = new URL(args[1]).searchParams.get('state');
    await callback(`http://localhost:18000/?error=access_denied&error_description=${encodeURIComponent('the user said no')}&state=${state}`);
  } else if (args[0] === '--device') {
    await walk(args[1], {}, args[2]);
  } else {
    await walk(args[0], {});
  }
} catch (e) {
  log('failed', e);
  process.exit(2);
}
