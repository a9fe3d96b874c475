// Reads a stream with Node's own fetch for tests/transport/test_streaming.py and
// tests/test_watched_tasks.py: the URL, an abort time (ms) and, optionally, the Accept
// header to send as arguments; prints one JSON outcome: {text} for a body read to its
// end, {text, error, cause} for what the read threw (the text received until then).
const [url, abortMs, accept] = process.argv.slice(2);
const decoder = new TextDecoder();
let text = "";
try {
  const headers = accept ? {accept} : {};
  const answer = await fetch(url, {headers, signal: AbortSignal.timeout(Number(abortMs))});
  for await (const chunk of answer.body) {
    text += decoder.decode(chunk, {stream: true});
  }
  console.log(JSON.stringify({text}));
} catch (error) {
  const cause = error.cause ? (error.cause.code || error.cause.name) : null;
  console.log(JSON.stringify({text, error: error.name, message: error.message, cause}));
}
